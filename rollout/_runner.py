"""One rollout: sample -> step -> record -> check, under budgets, deadlines and global limiters.

The loop follows the cookbook's ``rollout_runner._run_loop`` step for step (same stop semantics,
pinned by ``tests/test_rollout_parity.py``) and adds what the cookbook's lacks: the global
sampling / env-step limiters (``anyio.Semaphore`` s), the step deadline, the run-time
extension check with its datum/token accounting (:class:`~rollout._extension.ExtensionTracker`),
compaction and the :class:`~rollout._results.TrajectoryStats`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import anyio
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
from rollout._call import SampleCall, check_takes_call
from rollout._compaction import (
    LOG_COMPACTION,
    METRIC_COMPACTION,
    METRIC_COMPACTION_UNSUPPORTED,
    apply_compaction,
)
from rollout._config import EngineConfig, ExtensionCheck
from rollout._extension import ExtensionBreak, ExtensionTracker
from rollout._results import InvalidCompletion, StepTimeout, TrajectoryStats

METRIC_EXT_BREAK = "rollout/ext_break"
"""1.0 on a transition whose *next* observation broke the extension property."""
LOG_EXT_BREAK = "ext_break"
"""Transition log key holding the break's description (decoded diff when unexpected)."""

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_P = ParamSpec("_P")

CallLimiter = anyio.Semaphore | anyio.CapacityLimiter
"""A global cap on concurrent calls (``acquire_nowait`` / ``acquire`` and ``release`` around a
policy call, ``async with`` around an env call): the engine makes semaphores
(``rollout._engine._limiter`` says why); a ``CapacityLimiter`` of your own works too."""

_NO_LIMIT: contextlib.AbstractAsyncContextManager[Any] = contextlib.nullcontext()
"""Stands in for an absent limiter (``async with`` it does nothing)."""
_NO_DEADLINE: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
"""Stands in for an absent deadline (reusable: ``nullcontext`` keeps no state)."""
_EMPTY = tinker.ModelInput.empty()
"""An episode's observation until its first one arrives (shared: the engine never mutates an observation)."""


class _Episode:
    """One rollout's state and steps (the cookbook's ``_RolloutRunner``, without hooks)."""

    def __init__(
        self,
        env: Env,
        policy: TokenCompleter,
        limits: RolloutLimits,
        config: EngineConfig,
        tracker: ExtensionTracker | None,
        sample_limiter: CallLimiter | None,
        step_limiter: CallLimiter | None,
        place: tuple[int, int, int],
    ) -> None:
        self.env = env
        self.policy = policy
        self.limits = limits
        self.token_budget = has_token_budget(limits)  # a per-turn check otherwise
        self.config = config
        self.tracker = tracker
        self.sample_limiter = sample_limiter
        self.step_limiter = step_limiter if step_limiter is not None else _NO_LIMIT
        self.place = place  # (group, slot, attempt) of the policy calls
        self.transitions: list[Transition] = []
        self.ob: tinker.ModelInput = _EMPTY  # until the initial observation
        self.turns = 0
        self.sampled = 0
        self.truncations = 0  # "length" stops the env continued past (cookbook metric)

    async def run(self) -> str:
        """Run the episode; return its stop reason ("" when the env gave none and
        ``set_completed_stop_reason`` is off). Transitions accumulate in ``self.transitions``."""
        initial = await self._env_call("initial_observation", self.env.initial_observation)
        if isinstance(initial, InitialObservationOverflow):
            return self._overflow(initial)
        self.ob, stop = initial
        if self.tracker is not None:
            self.tracker.start(self.ob)

        while True:
            # 1. Budgets: stop before sampling when a turn or token budget is spent.
            reason = self._budget_stop()
            if reason is not None:
                self._stop_transition(reason)
                return reason

            # 2. Sample.
            ac = await self._sample(stop)

            # 3. Step the env and record the transition.
            result: StepResult = await self._env_call(
                "env.step", self.env.step, ac.tokens, extra=ActionExtra(stop_reason=ac.stop_reason)
            )
            transition = Transition(
                ob=self.ob,
                ac=ac,
                reward=result.reward,
                episode_done=result.episode_done,
                metrics=result.metrics,
                logs=result.logs,
            )
            self.transitions.append(transition)
            self.turns += 1
            self.sampled += len(ac.tokens)
            if self.tracker is not None:
                self.tracker.acted(len(ac.tokens))
            self.ob = result.next_observation
            stop = result.next_stop_condition
            if result.episode_done:
                return self._env_stop(transition)
            if ac.stop_reason == "length":
                self.truncations += 1

            # 4. Check that the next observation extends this one + the action.
            if self.tracker is not None:
                brk = self.tracker.observe(ac.tokens, self.ob, self.turns, self.env)
                if brk is not None:
                    _mark_break(transition, brk)

    def _budget_stop(self) -> str | None:
        """The runner's stop before the next turn (turns, then token budgets), or None."""
        limits = self.limits
        if limits.max_turns is not None and self.turns >= limits.max_turns:
            return StopReason.MAX_TURNS
        if self.token_budget:
            return cumulative_stop(limits, self.ob.length, self.sampled)
        return None

    async def _sample(self, stop: StopCondition) -> TokensWithLogprobs:
        """One policy call, under the sampling limiter and ``sampling_turn_timeout_seconds``;
        with ``max_tokens`` from the token budgets and ``call`` (its place) on a seeded engine."""
        kwargs: dict[str, Any] = {}
        if self.token_budget:
            kwargs["max_tokens"] = per_call_max_tokens(self.limits, self.ob.length, self.sampled)
        if self.config.seed is not None:
            kwargs["call"] = SampleCall(self.config.seed, *self.place, turn=self.turns)
        timeout = self.limits.sampling_turn_timeout_seconds
        limiter = self.sample_limiter
        if limiter is None:
            with _deadline(timeout):
                return _checked(await self.policy(self.ob, stop, **kwargs))
        else:
            # Take a free slot with ``acquire_nowait`` and wait (``acquire``) only when none is
            # free: ``async with limiter`` also runs anyio's cancellation check on every call (a
            # task-state lookup and a walk up the task's cancel scopes, three coroutines deep),
            # measured at about a third of what the engine adds to a call beyond a bare loop at
            # ``bench/rollout_engine.py``'s 5 ms (docs/measurements.md, session 18). Nothing is
            # lost: the policy call is itself the checkpoint, and a cancelled wait in ``acquire``
            # holds no slot.
            try:
                limiter.acquire_nowait()
            except anyio.WouldBlock:
                await limiter.acquire()
            ac: TokensWithLogprobs | None = None  # stays None when the deadline fires
            try:
                with _deadline(timeout):
                    ac = await self.policy(self.ob, stop, **kwargs)
            finally:
                handed_over = limiter.statistics().tasks_waiting > 0
                limiter.release()
            if handed_over:
                # A call was waiting for this slot: let it start before this episode's env step
                # (it is queued behind this task otherwise), so the sampler is not kept idle by
                # env work. When many calls end together (a batched sampler, or a service's
                # replies), this takes a whole round of env steps off the critical path:
                # ``bench/rollout_engine.py``'s wall vs ideal (docs/measurements.md, session 19).
                await anyio.lowlevel.checkpoint()
            if ac is not None:
                return _checked(ac)
        raise SamplingTurnTimeoutError(f"Sampling call exceeded sampling_turn_timeout_seconds={timeout}")

    async def _env_call(
        self, what: str, fn: Callable[_P, Awaitable[_T]], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``await fn(*args, **kwargs)`` under the env-step limiter and ``step_timeout_s`` (the
        coroutine is created only once a slot is held, so a cancelled wait leaves no un-awaited
        coroutine)."""
        timeout = self.config.step_timeout_s
        if self.step_limiter is _NO_LIMIT and timeout is None:
            return await fn(*args, **kwargs)  # the default: nothing to hold or time
        async with self.step_limiter:
            with _deadline(timeout):
                return await fn(*args, **kwargs)
        raise StepTimeout(f"{what} exceeded step_timeout_s={timeout}")

    def _overflow(self, initial: InitialObservationOverflow) -> str:
        """The env's first observation is already over budget: one empty, terminal transition."""
        self.transitions.append(
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

    def _env_stop(self, transition: Transition) -> str:
        """The env ended the episode: its ``stop/<reason>``, else ``completed`` (recorded)."""
        reason = stop_reason_from_metrics(transition.metrics)
        if reason is not None:
            return reason
        if not self.config.set_completed_stop_reason:
            return ""
        transition.metrics = {**transition.metrics, f"{STOP_METRIC_PREFIX}{StopReason.COMPLETED}": 1.0}
        return StopReason.COMPLETED

    def _stop_transition(self, reason: str) -> None:
        """The runner stopped the episode: mark the last transition terminal with
        ``stop/<reason>`` (or add an empty one)."""
        key = f"{STOP_METRIC_PREFIX}{reason}"
        if self.transitions:
            last = self.transitions[-1]
            metrics = {k: v for k, v in last.metrics.items() if not k.startswith(STOP_METRIC_PREFIX)}
            metrics[key] = 1.0
            last.episode_done = True
            last.metrics = metrics
        else:
            self.transitions.append(
                Transition(
                    ob=tinker.ModelInput.empty(),
                    ac=TokensWithLogprobs(tokens=[], maybe_logprobs=[]),
                    reward=0.0,
                    episode_done=True,
                    metrics={key: 1.0},
                )
            )


def _deadline(seconds: float | None) -> contextlib.AbstractContextManager[Any]:
    """``anyio.move_on_after(seconds)``, or nothing without a deadline (a cancel scope per call
    costs a backend lookup and task-state bookkeeping on every turn; ``None`` is the default)."""
    return _NO_DEADLINE if seconds is None else anyio.move_on_after(seconds)


def _checked(ac: TokensWithLogprobs) -> TokensWithLogprobs:
    """The completion with its tokens as a list; :class:`InvalidCompletion` when its logprobs do
    not match its tokens."""
    if type(ac.tokens) is not list:
        ac.tokens = list(ac.tokens)
    if ac.maybe_logprobs is not None and len(ac.maybe_logprobs) != len(ac.tokens):
        raise InvalidCompletion(
            f"completer returned {len(ac.tokens)} tokens but {len(ac.maybe_logprobs)} logprobs"
        )
    return ac


def _mark_break(transition: Transition, brk: ExtensionBreak) -> None:
    """Record an extension break (and a compaction) on the transition before it."""
    metrics = {METRIC_EXT_BREAK: 1.0}
    logs = {LOG_EXT_BREAK: str(brk)}
    if brk.compaction:
        metrics[METRIC_COMPACTION] = 1.0
        logs[LOG_COMPACTION] = str(brk)
    transition.metrics = {**transition.metrics, **metrics}
    transition.logs = {**transition.logs, **logs}


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
    sample_limiter: CallLimiter | None = None,
    step_limiter: CallLimiter | None = None,
    group: int = 0,
    slot: int = 0,
    attempt: int = 0,
) -> tuple[Trajectory, TrajectoryStats]:
    """Run one episode of ``env`` with ``policy``; return the cookbook ``Trajectory`` + stats.

    The same loop and stop semantics as the cookbook's ``rollout_runner.run_rollout(policy, env,
    limits=...)`` (pinned by ``tests/test_rollout_parity.py``), plus what it lacks: the global
    limiters (``sample_limiter`` around every policy call, ``step_limiter`` around every env
    call), the step deadline, the run-time extension check, compaction and the
    :class:`TrajectoryStats`. Limits come from ``config.limits`` (unset fields fall back to the
    env's own ``rollout_limits``, as in the cookbook). A ``config.compaction_period`` is pushed
    into the env first (see :class:`rollout.SupportsCompaction`;
    :class:`rollout.CompactionUnsupported` when the env cannot honour it and
    ``config.compaction_required``). Budget stops and the rollout deadline end the episode
    gracefully with their ``StopReason``; a sampling/step deadline, a completer or env exception
    propagates (the group's strategy decides what happens). ``group``, ``slot``, ``attempt``: the
    episode's place, handed to the policy with each call when ``config.seed`` is set
    (:class:`rollout.SampleCall`).
    """
    config = config or EngineConfig()
    if config.seed is not None:
        check_takes_call(policy)
    t0 = time.monotonic()
    limits = effective_limits(config.limits, env)
    if limits.max_tool_calls is not None:
        _push_tool_call_limit(env, limits.max_tool_calls)
    unsupported = False
    if config.compaction_period is not None:
        unsupported = not apply_compaction(env, config.compaction_period, required=config.compaction_required)
    tracker = ExtensionTracker(config.extension_check, config.boundary_window)
    checking = config.extension_check is not ExtensionCheck.OFF
    episode = _Episode(
        env,
        policy,
        limits,
        config,
        tracker if checking else None,
        sample_limiter,
        step_limiter,
        (group, slot, attempt),
    )

    reason: str | None = None
    with _deadline(limits.rollout_timeout_seconds):
        reason = await episode.run()
    if reason is None:  # the rollout deadline fired: keep what was collected, drop the in-flight turn
        reason = StopReason.ROLLOUT_TIMEOUT
        episode._stop_transition(reason)

    transitions = episode.transitions
    if episode.truncations and transitions:
        transitions[-1].metrics = {**transitions[-1].metrics, TRUNCATION_METRIC_KEY: float(episode.truncations)}
    if unsupported and transitions:
        transitions[-1].metrics = {**transitions[-1].metrics, METRIC_COMPACTION_UNSUPPORTED: 1.0}
    if checking:
        tracker.close()
    trajectory = Trajectory(transitions=transitions, final_ob=episode.ob, stop_reason=reason or None)
    stats = TrajectoryStats(
        turns=episode.turns,
        sampled_tokens=episode.sampled,
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
