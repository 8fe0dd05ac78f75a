"""One rollout: the hot loop (sample -> step -> record -> check), budgets, deadlines, gates.

Cost notes (this loop is what ``bench/rollout_engine.py`` measures):

- No cancel scope is opened per turn unless a per-call deadline is configured; the rollout
  deadline is one ``anyio.move_on_after`` around the whole loop.
- The two global limits are :class:`Gate` s (see its docstring for why not
  ``async with CapacityLimiter``): taking a free slot is an integer decrement inlined here, with
  no checkpoint; only a full gate queues (FIFO, on ``anyio.Event`` s). A gate whose limit is
  ``None`` is skipped entirely.
- Token-budget arithmetic runs only when a token budget is set.
- The extension tracker's per-turn state is kept in locals of the loop (``ExtensionTracker.hot_state``):
  a turn whose next observation is one text chunk extending the last one does its datum/token
  accounting and the exact ``FULL`` check (two C-level list comparisons) inline, with no method
  call; anything else (a break, several chunks, ``BOUNDARY``) goes through the tracker's methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import sniffio
import tinker
from tinker_cookbook.completers import StopCondition, TokenCompleter, TokensWithLogprobs
from tinker_cookbook.rl.rollout_limits import RolloutLimits
from tinker_cookbook.rl.rollout_runner import (
    TRUNCATION_METRIC_KEY,
    SamplingTurnTimeoutError,
    stop_reason_from_metrics,
)
from tinker_cookbook.rl.types import (
    STOP_METRIC_PREFIX,
    ActionExtra,
    Env,
    InitialObservationOverflow,
    StepResult,
    StopReason,
    Trajectory,
    Transition,
)

from rollout._budget import cumulative_stop, effective_limits, has_token_budget, per_call_max_tokens
from rollout._compaction import (
    LOG_COMPACTION,
    METRIC_COMPACTION,
    METRIC_COMPACTION_UNSUPPORTED,
    apply_compaction,
)
from rollout._config import EngineConfig, ExtensionCheck
from rollout._context import _CURRENT, _Place
from rollout._extension import ExtensionTracker
from rollout._results import InvalidCompletion, StepTimeout, TrajectoryStats

METRIC_EXT_BREAK = "rollout/ext_break"
"""1.0 on a transition whose *next* observation broke the extension property."""
LOG_EXT_BREAK = "ext_break"
"""Transition log key holding the break's description (decoded diff when unexpected)."""

logger = logging.getLogger(__name__)


class Gate:
    """A global cap on concurrent calls of one kind, with a fast path (``None``: no cap).

    Why not ``async with anyio.CapacityLimiter``: its ``acquire`` does two event-loop
    checkpoints even when a slot is free, which halved a zero-latency engine's throughput
    (measured). A gate is a counter of free slots plus a FIFO of waiters: taking a free slot is
    one integer decrement (inlined in the rollout loop, no checkpoint; the awaited call that
    follows is the checkpoint), and a release hands the slot straight to the oldest waiter, so
    the bound is exact and waiting is fair. A waiter cancelled after being handed a slot passes
    it on. ``limit >= concurrent rollouts`` therefore costs ~nothing, and so does any
    uncontended moment of a tighter limit.

    Waiters are plain asyncio futures on the asyncio backend (an ``anyio.Event`` costs a
    backend lookup per construction, the largest part of a contended hand-off, measured in
    ``bench/rollout_engine.py``'s latency run) and ``anyio.Event`` s on any other backend.
    """

    __slots__ = ("_waiters", "free", "limit")

    def __init__(self, limit: int | None):
        self.limit = limit
        self.free = limit or 0
        """Free slots (the hot loop decrements it directly when positive)."""
        self._waiters: deque[Any] = deque()

    @property
    def enabled(self) -> bool:
        """Whether this gate caps anything."""
        return self.limit is not None

    @property
    def in_use(self) -> int:
        """Slots currently held."""
        return (self.limit or 0) - self.free

    async def acquire(self) -> None:
        """Take a slot, waiting (FIFO) when none is free."""
        if self.free > 0:
            self.free -= 1
        else:
            await self.wait()

    async def wait(self) -> None:
        """Slow path: queue until a release hands this caller a slot."""
        loop = _running_asyncio_loop()
        if loop is None:
            await self._wait_event()
            return
        future = loop.create_future()
        self._waiters.append(future)
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled():
                self.release()  # the slot was handed over as we were cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(future)
            raise

    async def _wait_event(self) -> None:
        event = anyio.Event()
        self._waiters.append(event)
        try:
            await event.wait()
        except BaseException:
            if event.is_set():
                self.release()
            else:
                self._waiters.remove(event)
            raise

    def release(self) -> None:
        """Give a slot back (to the oldest waiter still waiting, if any)."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():
                    waiter.set_result(None)
                    return
            else:
                waiter.set()
                return
        self.free += 1


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop when the current async library is asyncio, else None (looked up
    on every wait, not cached: a gate may outlive the loop it first ran on)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop if sniffio.current_async_library() == "asyncio" else None


_EMPTY = tinker.ModelInput.empty()  # shared: building one costs a pydantic validation
_TEXT_CHUNK = tinker.EncodedTextChunk


_COMPLETED_KEY = f"{STOP_METRIC_PREFIX}{StopReason.COMPLETED}"
_PREFIX_LEN = len(STOP_METRIC_PREFIX)


def _env_stop_reason(metrics: dict[str, Any]) -> str | None:
    """The cookbook's ``stop_reason_from_metrics`` (the first ``stop/<reason>`` key's reason),
    without its generator: called once per episode, on non-empty metrics only."""
    for key in metrics:
        if key.startswith(STOP_METRIC_PREFIX):
            return key[_PREFIX_LEN:]
    return None


_NO_PLACE = _Place(-1, -1, -1)
"""Stands in for an absent place (a bare ``run_episode``): the loop stores the turn unconditionally."""

_NO_GATE = Gate(None)
"""Stands in for an absent sampling gate in the hot loop's typed local (never taken)."""


class _State:
    """What a rollout has collected so far (read by the deadline path)."""

    __slots__ = ("ob", "sampled", "transitions", "truncations", "turns")

    def __init__(self) -> None:
        self.transitions: list[Transition] = []
        self.ob: tinker.ModelInput = _EMPTY
        self.sampled = 0
        self.turns = 0
        self.truncations = 0


async def _sample(
    policy: TokenCompleter,
    ob: tinker.ModelInput,
    stop: StopCondition,
    max_tokens: int | None,
    gate: Gate | None,
    timeout: float | None,
) -> TokensWithLogprobs:
    if gate is not None:
        await gate.acquire()
    try:
        if timeout is None:
            if max_tokens is None:
                return await policy(ob, stop)
            return await policy(ob, stop, max_tokens=max_tokens)
        try:
            with anyio.fail_after(timeout):
                if max_tokens is None:
                    return await policy(ob, stop)
                return await policy(ob, stop, max_tokens=max_tokens)
        except TimeoutError as e:
            raise SamplingTurnTimeoutError(
                f"Sampling call exceeded sampling_turn_timeout_seconds={timeout}"
            ) from e
    finally:
        if gate is not None:
            gate.release()


async def _env_call(
    call: Callable[[], Awaitable[Any]], gate: Gate | None, timeout: float | None, what: str
) -> Any:
    """``await call()`` under the env-step gate and the step deadline (the coroutine is created
    only once a slot is held, so a cancelled wait leaves no un-awaited coroutine)."""
    if gate is not None:
        await gate.acquire()
    try:
        if timeout is None:
            return await call()
        try:
            with anyio.fail_after(timeout):
                return await call()
        except TimeoutError as e:
            raise StepTimeout(f"{what} exceeded step_timeout_s={timeout}") from e
    finally:
        if gate is not None:
            gate.release()


def _stop_transition(state: _State, reason: str) -> None:
    """Mark the last transition terminal with ``stop/<reason>`` (or add an empty one)."""
    key = f"{STOP_METRIC_PREFIX}{reason}"
    if state.transitions:
        last = state.transitions[-1]
        metrics = {k: v for k, v in last.metrics.items() if not k.startswith(STOP_METRIC_PREFIX)}
        metrics[key] = 1.0
        last.episode_done = True
        last.metrics = metrics
    else:
        state.transitions.append(
            Transition(
                ob=_EMPTY,
                ac=TokensWithLogprobs(tokens=[], maybe_logprobs=[]),
                reward=0.0,
                episode_done=True,
                metrics={key: 1.0},
            )
        )


async def _loop(
    env: Env,
    policy: TokenCompleter,
    limits: RolloutLimits,
    config: EngineConfig,
    state: _State,
    tracker: ExtensionTracker | None,
    sample_gate: Gate | None,
    step_gate: Gate | None,
) -> str:
    """Run the episode; return its stop reason (transitions accumulate in ``state``)."""
    step_timeout = config.step_timeout_s
    sample_timeout = limits.sampling_turn_timeout_seconds
    if step_gate is None and step_timeout is None:
        initial = await env.initial_observation()
    else:
        initial = await _env_call(env.initial_observation, step_gate, step_timeout, "initial_observation")
    if isinstance(initial, InitialObservationOverflow):
        state.transitions.append(
            Transition(
                ob=tinker.ModelInput.empty(),
                ac=TokensWithLogprobs(tokens=[], maybe_logprobs=[]),
                reward=initial.reward,
                episode_done=True,
                metrics=dict(initial.metrics),
                logs=dict(initial.logs),
            )
        )
        return stop_reason_from_metrics(initial.metrics) or StopReason.MAX_TOKENS
    ob, stop = initial
    transitions = state.transitions
    max_turns = limits.max_turns
    turn_cap = max_turns if max_turns is not None else sys.maxsize
    token_budget = has_token_budget(limits)
    limited = token_budget or max_turns is not None  # one test per turn when nothing is capped
    max_tokens: int | None = None
    plain_sample = sample_gate is None and sample_timeout is None
    gate = sample_gate if sample_gate is not None else _NO_GATE  # typed for the inlined fast path
    plain_step = step_gate is None and step_timeout is None
    turn = 0
    sampled = 0
    place = _CURRENT.get() or _NO_PLACE  # the place of each policy call (rollout._context)
    truncations = 0  # "length" stops the env continued past (cookbook metric)
    # The tracker's per-turn state lives in locals while the loop runs (see ExtensionTracker.hot_state):
    # the common turn (no pending split; FULL mode: one text chunk that extends) touches no attribute.
    # While ``fast``, ``unique`` and ``pending`` are not updated per turn: an extending turn keeps
    # ``unique - seg`` constant (``base``) and leaves ``pending == n_prev - seg`` (ExtensionTracker.acted
    # then observe), so both are recomputed from ``base`` where the fast path is left.
    full = split = fast = False  # fast: FULL check, no pending split (the inlined path)
    prev: list[Any] = []
    n_prev = pending = seg = unique = per_turn = base = 0
    if tracker is not None:
        tracker.start(ob)
        full = fast = tracker.mode is ExtensionCheck.FULL
        prev, n_prev, pending, seg, unique, per_turn = tracker.hot_state()
        base = unique - seg
    try:
        while True:
            if limited:
                if turn >= turn_cap:
                    _stop_transition(state, StopReason.MAX_TURNS)
                    return StopReason.MAX_TURNS
                if token_budget:
                    reason = cumulative_stop(limits, ob.length, sampled)
                    if reason is not None:
                        _stop_transition(state, reason)
                        return reason
                    max_tokens = per_call_max_tokens(limits, ob.length, sampled)
            place.turn = turn
            if plain_sample:
                ac = await (
                    policy(ob, stop) if max_tokens is None else policy(ob, stop, max_tokens=max_tokens)
                )
            elif sample_timeout is None:
                # Gate fast paths inlined (see Gate): no coroutine, no checkpoint when a slot is
                # free; a release with nobody waiting is an increment.
                if gate.free > 0:
                    gate.free -= 1
                else:
                    await gate.wait()
                try:
                    ac = await (
                        policy(ob, stop) if max_tokens is None else policy(ob, stop, max_tokens=max_tokens)
                    )
                finally:
                    if gate._waiters:
                        gate.release()
                    else:
                        gate.free += 1
            else:
                ac = await _sample(policy, ob, stop, max_tokens, sample_gate, sample_timeout)
            tokens = ac.tokens
            if type(tokens) is not list:
                tokens = ac.tokens = list(tokens)
            n_ac = len(tokens)
            logprobs = ac.maybe_logprobs
            if logprobs is not None and len(logprobs) != n_ac:
                raise InvalidCompletion(f"completer returned {n_ac} tokens but {len(logprobs)} logprobs")
            ac_stop = ac.stop_reason
            extra: ActionExtra = {"stop_reason": ac_stop}
            if plain_step:
                result: StepResult = await env.step(tokens, extra=extra)
            else:
                result = await _env_call(
                    functools.partial(env.step, tokens, extra=extra), step_gate, step_timeout, "env.step"
                )
            done = result.episode_done
            transition = Transition(ob, ac, result.reward, done, result.metrics, result.logs)
            transitions.append(transition)
            turn += 1
            sampled += n_ac
            if done:
                if tracker is not None:
                    if split:
                        tracker.set_hot_state(prev, n_prev, pending, seg, unique, per_turn)
                        tracker.acted(n_ac)
                        prev, n_prev, pending, seg, unique, per_turn = tracker.hot_state()
                    else:  # ExtensionTracker.acted, inlined
                        seg = n_prev + n_ac
                        unique = base + seg if fast else unique + pending + n_ac
                        pending = 0
                        per_turn += seg
                        fast = False  # unique and pending are current
                ob = result.next_observation
                metrics = result.metrics
                reason = _env_stop_reason(metrics) if metrics else None
                if reason is None:
                    if not config.set_completed_stop_reason:
                        return ""
                    transition.metrics = {**metrics, _COMPLETED_KEY: 1.0}
                    reason = StopReason.COMPLETED
                return reason
            if ac_stop == "length":
                truncations += 1
            ob = result.next_observation
            stop = result.next_stop_condition
            if fast:
                # ExtensionTracker.acted, inlined (unique and pending: see ``base``)
                seg = n_prev + n_ac
                per_turn += seg
                # ExtensionTracker.observe's FULL check, inlined for one text chunk. Exact: every
                # token of the previous observation and of the action is compared, by two C-level
                # list comparisons, the short action slice first (equal slices imply the length).
                chunks = ob.chunks
                if len(chunks) == 1:
                    chunk = chunks[0]
                    if type(chunk) is _TEXT_CHUNK:
                        new = chunk.tokens
                        if type(new) is list and new[n_prev:seg] == tokens and new[:n_prev] == prev:
                            n_prev = len(new)
                            prev = new
                            continue
                # Anything else (a break, several chunks): the tracker's own path.
                assert tracker is not None
                unique = base + seg
                pending = 0
                fast = False  # unique and pending are current
                tracker.set_hot_state(prev, n_prev, 0, seg, unique, per_turn)
                brk = tracker.observe(tokens, ob, turn, env)
            elif tracker is None:
                continue
            else:  # BOUNDARY mode, or the previous observation broke: the tracker's own path
                tracker.set_hot_state(prev, n_prev, pending, seg, unique, per_turn)
                brk = tracker.step(tokens, ob, turn, env)
            prev, n_prev, pending, seg, unique, per_turn = tracker.hot_state()
            split = tracker.split
            fast = full and not split
            base = unique - seg
            if brk is not None:
                if brk.compaction:
                    transition.metrics = {
                        **transition.metrics,
                        METRIC_EXT_BREAK: 1.0,
                        METRIC_COMPACTION: 1.0,
                    }
                    transition.logs = {
                        **transition.logs,
                        LOG_EXT_BREAK: str(brk),
                        LOG_COMPACTION: str(brk),
                    }
                else:
                    transition.metrics = {**transition.metrics, METRIC_EXT_BREAK: 1.0}
                    transition.logs = {**transition.logs, LOG_EXT_BREAK: str(brk)}
    finally:  # also on the rollout deadline's cancellation
        state.ob = ob
        state.sampled = sampled
        state.turns = turn
        state.truncations = truncations
        if tracker is not None:
            if fast:
                unique = base + seg
                pending = n_prev - seg
            tracker.set_hot_state(prev, n_prev, pending, seg, unique, per_turn)


def _push_tool_call_limit(env: Env, max_tool_calls: int) -> None:
    """The cookbook runner's ``SupportsToolCallLimit`` seam: tool dispatch happens in the env."""
    setter = getattr(env, "set_max_tool_calls", None)
    if setter is None:
        logger.warning(
            "RolloutLimits.max_tool_calls=%d is configured, but the environment (%s) does not "
            "support a tool-call limit (no set_max_tool_calls method); the limit will not be enforced.",
            max_tool_calls,
            type(env).__name__,
        )
        return
    setter(max_tool_calls)


async def run_episode(
    policy: TokenCompleter,
    env: Env,
    config: EngineConfig | None = None,
    *,
    sample_gate: Gate | None = None,
    step_gate: Gate | None = None,
) -> tuple[Trajectory, TrajectoryStats]:
    """Run one episode of ``env`` with ``policy``; return the cookbook ``Trajectory`` + stats.

    The same loop and stop semantics as the cookbook's ``rollout_runner.run_rollout(policy, env,
    limits=...)`` (pinned by ``tests/test_rollout_parity.py``), plus what it lacks: the global
    gates, the step deadline, the run-time extension check, compaction and the
    :class:`TrajectoryStats`. Limits come from ``config.limits`` (unset fields fall back to the
    env's own ``rollout_limits``, as in the cookbook). A ``config.compaction_period`` is pushed
    into the env first (see :class:`rollout.SupportsCompaction`;
    :class:`rollout.CompactionUnsupported` when the env cannot honour it and
    ``config.compaction_required``). Budget stops and the rollout deadline end the episode
    gracefully with their ``StopReason``; a sampling/step deadline, a completer or env exception
    propagates (the group's strategy decides what happens).
    """
    config = config or EngineConfig()
    t0 = time.monotonic()
    limits = effective_limits(config.limits, env)
    if limits.max_tool_calls is not None:
        _push_tool_call_limit(env, limits.max_tool_calls)
    unsupported = False
    if config.compaction_period is not None:
        unsupported = not apply_compaction(env, config.compaction_period, required=config.compaction_required)
    state = _State()
    tracker = ExtensionTracker(config.extension_check, config.boundary_window)
    if config.extension_check is ExtensionCheck.OFF:
        tracker_used: ExtensionTracker | None = None
    else:
        tracker_used = tracker
    sgate = sample_gate if sample_gate is not None and sample_gate.limit is not None else None
    egate = step_gate if step_gate is not None and step_gate.limit is not None else None
    reason: str | None = None
    timeout = limits.rollout_timeout_seconds
    if timeout is None:
        reason = await _loop(env, policy, limits, config, state, tracker_used, sgate, egate)
    else:
        with anyio.move_on_after(timeout):
            reason = await _loop(env, policy, limits, config, state, tracker_used, sgate, egate)
        if reason is None:  # the deadline fired: keep what was collected, drop the in-flight turn
            reason = StopReason.ROLLOUT_TIMEOUT
            _stop_transition(state, reason)
    if state.truncations and state.transitions:
        last = state.transitions[-1]
        last.metrics = {**last.metrics, TRUNCATION_METRIC_KEY: float(state.truncations)}
    if unsupported and state.transitions:
        last = state.transitions[-1]
        last.metrics = {**last.metrics, METRIC_COMPACTION_UNSUPPORTED: 1.0}
    if tracker_used is not None:
        tracker.close()
    trajectory = Trajectory(transitions=state.transitions, final_ob=state.ob, stop_reason=reason or None)
    stats = TrajectoryStats(
        turns=state.turns,
        sampled_tokens=state.sampled,
        breaks=tuple(tracker.breaks),
        compaction_unsupported=unsupported,
        datums=tracker.datums,
        tokens_trained=tracker.tokens_trained,
        tokens_unique=tracker.tokens_unique,
        tokens_per_turn=tracker.tokens_per_turn,
        stop_reason=reason or "",
        elapsed_s=time.monotonic() - t0,
    )
    return trajectory, stats
