"""The conformance run: builds envs from a source, plays scripted and hypothesis-drawn episodes.

Everything async runs on one event loop in a helper thread (an anyio blocking portal), so
:func:`check_conformance` is a plain function that also works inside a running event loop.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import math
import numbers
import os
import pickle
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import tinker
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from tinker_cookbook.completers import StopCondition
from tinker_cookbook.renderers import Message, Renderer, ToolSpec
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, InitialObservationOverflow, StepResult
from tinker_cookbook.tokenizer_utils import Tokenizer

from envs.checker._report import CheckName, CheckResult, ConformanceReport, Outcome
from envs.checker._strategies import (
    WELL_FORMED_TEXTS,
    ActionKind,
    DrawnAction,
    drawn_actions,
    example_tool_call,
    malformed_tool_call_action,
    tool_specs,
    well_formed_action,
)
from envs.core import METRIC_FAULT_PREFIX
from envs.gym._adapter import EnvSource, find_tokenizer, make_env_group, resolve_builder
from envs.seats import SeatedGroupBuilder
from renderers_ext import check_extension, extension_expected, render_action

_HEALTH = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
]


_EPISODE_CHECKS = frozenset(
    {
        CheckName.NO_RAISE,
        CheckName.STEP_TYPES,
        CheckName.FINITE_REWARDS,
        CheckName.EPISODE_BUDGET,
        CheckName.EXTENSION,
        CheckName.NON_BLOCKING,
        CheckName.TOOL_PROTOCOL,
    }
)


@dataclass(frozen=True)
class CheckConfig:
    """Knobs of a conformance run."""

    examples: int = 40
    """Hypothesis-drawn episodes (each plays drawn actions until the episode ends)."""
    seed: int = 0
    """Seed of the scripted episodes and of hypothesis."""
    max_action_tokens: int = 256
    """Length of max-length actions (the sampler's ``max_tokens``)."""
    block_threshold_s: float = 0.5
    """A step that blocks the event loop longer than this fails :attr:`CheckName.NON_BLOCKING`."""
    max_steps: int = 64
    """Turn budget assumed for envs that declare none."""
    max_episode_steps: int = 200
    """The checker's own bound on an episode, whatever turn budget the env declares: an episode
    still going after this many steps fails :attr:`CheckName.EPISODE_BUDGET` (an env that never
    ends under a huge budget fails, it does not hang the check)."""
    step_timeout_s: float = 60.0
    """A step that does not return within this is a hang (fails :attr:`CheckName.NO_RAISE`)."""
    scripted_episodes: int = 2
    """Episodes of clean replies only (these check the extension property)."""
    fail_fast: bool = True
    """Stop drawing episodes at the first failure (False: keep going, count every crash)."""
    tokenizer: Tokenizer | None = None
    """The policy tokenizer when the env exposes none (``env.renderer.tokenizer``)."""
    renderer: Renderer | None = None
    """The renderer when the env exposes none at ``.renderer`` (e.g. a cookbook env that keeps
    it elsewhere): gives the tokenizer, renders tool calls, and says where the extension
    property is claimed."""
    tools: Sequence[ToolSpec] | None = None
    """Tools to draw calls to when the env declares none (``env.tools``)."""
    action_messages: st.SearchStrategy[Message] | None = None
    """Assistant messages worth drawing, besides the env's own ``action_messages()``."""
    allow_skip: frozenset[CheckName] = frozenset()
    """Checks that may end up not run without failing the report (e.g. ``EXTENSION`` for an env
    whose episodes cannot get past one turn). Any other check that cannot run fails."""


def declared_budget(env: Env, default: int) -> tuple[int, str]:
    """The turn budget ``env`` declares, and where it was found."""
    limits = getattr(env, "limits", None)
    turns = getattr(limits, "max_turns", None)
    if isinstance(turns, int) and not isinstance(turns, bool):
        return turns, "env.limits.max_turns"
    turns = getattr(env, "max_turns", None)
    if isinstance(turns, int) and not isinstance(turns, bool):
        return turns, "env.max_turns"
    return default, "undeclared; checker max_steps"


def describe_action(action: Sequence[int], tokenizer: Tokenizer | None) -> str:
    """A short readable description of an action (ids and decoded text)."""
    if not action:
        return "[] (empty)"
    ids = ", ".join(map(str, action[:8])) + (", …" if len(action) > 8 else "")
    text = ""
    if tokenizer is not None:
        decoded = tokenizer.decode(list(action))
        text = f" = {decoded[:60]!r}" + ("…" if len(decoded) > 60 else "")
    return f"{len(action)} tokens [{ids}]{text}"


def describe_exception(error: BaseException) -> str:
    """``Type: message (at file:line in function)`` for the innermost frame."""
    where = ""
    frames = traceback.extract_tb(error.__traceback__)
    if frames:
        last = frames[-1]
        where = f" (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"
    message = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {message}{where}" if message else f"{type(error).__name__}{where}"


def pickle_problem(obj: Any) -> str | None:
    """None when ``obj`` round-trips through pickle, else what breaks (naming the culprit field)."""
    try:
        pickle.loads(pickle.dumps(obj))
        return None
    except Exception as error:
        culprit = ""
        fields = getattr(obj, "__dict__", None)
        if isinstance(fields, dict):
            for name, value in fields.items():
                try:
                    pickle.dumps(value)
                except Exception:
                    culprit = f"field {name!r} ({type(value).__name__}) cannot be pickled: "
                    break
        return f"{type(obj).__name__}: {culprit}{type(error).__name__}: {error}"


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _finite(x: Any) -> bool:
    return _is_number(x) and math.isfinite(float(x))


def stop_condition_problem(stop: Any, *, allow_empty: bool = False) -> str | None:
    """What is wrong with a stop condition (None when it is a list of ints or of strings)."""
    if not isinstance(stop, list):
        return f"stop condition is a {type(stop).__name__}, not a list"
    if not stop:
        return None if allow_empty else "stop condition is empty: sampling would only stop at max_tokens"
    if not (all(isinstance(s, int) for s in stop) or all(isinstance(s, str) and s for s in stop)):
        return f"stop condition mixes types or has empty strings: {stop!r}"
    return None


def tokens_problem(model_input: Any, vocab: int | None, what: str) -> tuple[list[int] | None, str | None]:
    """The tokens of ``model_input``, or what is wrong with it."""
    if not isinstance(model_input, tinker.ModelInput):
        return None, f"{what} is a {type(model_input).__name__}, not a tinker.ModelInput"
    try:
        tokens = list(model_input.to_ints())
    except Exception as error:
        return None, f"{what} is not text-only: {describe_exception(error)}"
    if vocab is not None:
        bad = next((t for t in tokens if not 0 <= t < vocab), None)
        if bad is not None:
            return None, f"{what} holds token id {bad}, outside the vocabulary [0, {vocab})"
    return tokens, None


def step_result_problem(result: Any, vocab: int | None) -> str | None:
    """What is wrong with the types of a step result (None when nothing)."""
    if not isinstance(result, StepResult):
        return f"step returned a {type(result).__name__}, not a StepResult"
    if not _is_number(result.reward):
        return f"reward is a {type(result.reward).__name__} ({result.reward!r}), not a number"
    if not isinstance(result.episode_done, bool):
        return f"episode_done is a {type(result.episode_done).__name__}, not a bool"
    _, problem = tokens_problem(result.next_observation, vocab, "next_observation")
    if problem:
        return problem
    problem = stop_condition_problem(result.next_stop_condition, allow_empty=result.episode_done)
    if problem:
        return f"next_stop_condition: {problem}"
    if not isinstance(result.metrics, dict) or not all(
        isinstance(k, str) and _is_number(v) for k, v in result.metrics.items()
    ):
        return f"metrics must map str to numbers, got {result.metrics!r:.120}"
    if not isinstance(result.logs, dict):
        return f"logs is a {type(result.logs).__name__}, not a dict"
    return None


def tool_protocol_problem(turn: Sequence[Message]) -> str | None:
    """What is wrong with how a game answered the tool calls of one assistant message (None
    when nothing): ``turn`` is that assistant message followed by the game's new messages.

    Each parsed call must be answered by exactly one ``tool``-role message; when the calls have
    ids, by the one whose ``tool_call_id`` is the call's id. Calls that could not be parsed
    (``unparsed_tool_calls``) may be answered by tool messages without an id."""
    if not turn:
        return None
    assistant, replies = turn[0], list(turn[1:])
    calls = list(assistant.get("tool_calls") or [])
    if not calls:
        return None
    names = ", ".join(f"{c.function.name}" + (f" (id {c.id})" if c.id else "") for c in calls[:3])
    results = [m for m in replies if m.get("role") == "tool"]
    roles = sorted({str(m.get("role")) for m in replies})
    if not results:
        if "user" in roles:
            return f"tool results sent back with the 'user' role, not 'tool': the call(s) {names} got no tool message"
        return f"tool call(s) {names} left unanswered while the game goes on (new message roles: {roles or 'none'})"
    if not all(c.id for c in calls):  # a renderer that loses ids: answered one to one, in order
        if len(results) < len(calls):
            return f"{len(calls)} tool call(s) ({names}) but {len(results)} tool message(s): some left unanswered"
        return None
    unnamed = [m for m in results if not m.get("tool_call_id")]
    if len(unnamed) > len(assistant.get("unparsed_tool_calls") or []):
        content = str(unnamed[0].get("content"))[:40]
        return f"a tool result without its tool_call_id (content {content!r}; the calls: {names})"
    answered = Counter(m.get("tool_call_id") for m in results if m.get("tool_call_id"))
    for call in calls:
        if answered[call.id] == 0:
            return f"tool call {call.function.name} (id {call.id}) left unanswered while the game goes on"
        if answered[call.id] > 1:
            return f"tool call {call.function.name} (id {call.id}) answered {answered[call.id]} times"
    stray = sorted(str(i) for i in set(answered) - {c.id for c in calls})
    if stray:
        return f"a tool result answers id {stray[0]!r}, which no call of this turn has (the calls: {names})"
    return None


_MAX_PLAN = 24
"""Most actions drawn per fuzz episode (longer episodes cycle through them)."""


class _StopFuzz(BaseException):
    """Ends a hypothesis run at once (a BaseException: hypothesis neither shrinks nor replays it)."""


class _LagMonitor:
    """Measures the longest stretch the event loop went without running this ticker, less the
    interpreter's garbage-collection pauses in it (the runtime's, not the env's: a full collection
    in a large test process can take half a second)."""

    def __init__(self, interval: float = 0.005):
        self.interval = interval
        self.max_gap = 0.0
        self._last = 0.0
        self._gc_s = 0.0
        self._gc_start: float | None = None

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.monotonic()
        elif self._gc_start is not None:
            self._gc_s += time.monotonic() - self._gc_start
            self._gc_start = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._last = time.monotonic()
        gc.callbacks.append(self._on_gc)
        try:
            task_status.started()
            while True:
                await anyio.sleep(self.interval)
                self._tick()
        finally:
            gc.callbacks.remove(self._on_gc)

    def _tick(self) -> None:
        now = time.monotonic()
        self.max_gap = max(self.max_gap, now - self._last - self.interval - self._gc_s)
        self._last, self._gc_s = now, 0.0


@dataclass(frozen=True)
class _StepOutcome:
    result: Any
    error: BaseException | None
    blocked_s: float


class ConformanceRun:
    """One conformance run over a source (use :func:`check_conformance`, or this for fuzzing)."""

    def __init__(self, portal: BlockingPortal, source: EnvSource, config: CheckConfig):
        from backend.model import register_tokenizers

        register_tokenizers()  # envs of the embedded models resolve (and unpickle) their tokenizers offline
        self.portal = portal
        self.source = source
        self.config = config
        self.failures: dict[CheckName, str] = {}
        self.notes: dict[CheckName, str] = {}
        self.skips: dict[CheckName, str] = {}
        self.tokenizer: Tokenizer | None = config.tokenizer
        self.vocab: int | None = None
        self.actions = 0
        self.episodes = 0
        self.crashes = 0
        self.extension_turns = 0
        self.longest_episode = 0
        self.budget_seen: tuple[int, str] | None = None
        self.max_blocked = 0.0
        self.rewards: list[float] = []
        self.stop_reasons: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        """Actions stepped, per :class:`ActionKind`."""
        self.faults: Counter[str] = Counter()
        """Steps per reported fault (``turngym/fault/<kind>`` metrics)."""
        self.faults_played_on: Counter[str] = Counter()
        """Faulty steps after which the episode went on (a policy that plays them)."""
        self.renderer: Renderer | None = config.renderer
        self.tools: list[ToolSpec] = list(config.tools or [])
        self.messages: st.SearchStrategy[Message] | None = config.action_messages
        self.not_run: dict[CheckName, str] = {}
        self.continued_steps = 0
        """Steps after which the episode went on (a next observation followed)."""
        self.claimed_steps = 0
        """Continued steps for which the renderer claims the extension property."""
        self.tool_extension_turns = 0
        """Extension checks after a tool-call action."""
        self.tool_turns_checked = 0
        """Continued turns whose tool calls were checked for their answers (tool protocol)."""
        self._strategies: dict[tuple[Any, ...], st.SearchStrategy[DrawnAction]] = {}
        self.initial_stop: StopCondition | None = None
        self.plan_budget = config.max_steps
        self.action_limit: int | None = None
        """Stop drawing episodes once this many actions were stepped (None: no limit)."""

    # --- bookkeeping ---------------------------------------------------------------------
    def fail(self, check: CheckName, detail: str) -> None:
        """Record the first failure of ``check``."""
        self.failures.setdefault(check, detail)

    @property
    def stopped(self) -> bool:
        """Whether fail-fast fuzzing should stop drawing."""
        return self.config.fail_fast and any(check in _EPISODE_CHECKS for check in self.failures)

    # --- the run -------------------------------------------------------------------------
    def prepare(self) -> bool:
        """The static checks (pickle, ``make_envs``, initial observations) and the tokenizer;
        True when episodes can be played."""
        made = self._build(self.config.seed)
        if made is None:
            return False
        problem = pickle_problem(made) if isinstance(made, EnvGroupBuilder) else "a single Env, not a builder"
        if problem:
            self.fail(CheckName.PICKLE, f"pickle round trip failed: {problem}")
        else:
            self.notes[CheckName.PICKLE] = f"{len(pickle.dumps(made))} bytes round-trip"
        envs = self._make_envs(made)
        if envs is None:
            self._cleanup_quietly(made)
            return False
        self._declared_actions(made, envs[0])
        if self.tokenizer is None:
            self.tokenizer = (
                (self.renderer.tokenizer if self.renderer is not None else None)
                or find_tokenizer(made)
                or next((t for t in map(find_tokenizer, envs) if t), None)
            )
        self.vocab = len(self.tokenizer) if self.tokenizer is not None else None
        ok = self._check_initial(envs)
        self._cleanup_quietly(made)
        if ok and self.tokenizer is None:
            for check in _EPISODE_CHECKS:
                self.not_run[check] = (
                    "no tokenizer: the env has no .renderer (pass --renderer NAME, or renderer=)"
                )
            return False
        if ok and self.initial_stop is None:
            for check in _EPISODE_CHECKS:
                self.not_run[check] = "every initial observation overflowed: no episode to play"
            return False
        return ok

    def _declared_actions(self, made: EnvGroupBuilder | Env, env: Env) -> None:
        """The env's renderer, tools and message strategy (what the config does not give)."""
        if self.renderer is None:
            found = getattr(env, "renderer", None) or getattr(made, "renderer", None)
            self.renderer = found if isinstance(found, Renderer) else None
        if not self.tools:
            for holder in (env, getattr(env, "message_env", None)):
                declared = getattr(holder, "tools", None)
                if declared:
                    try:
                        self.tools = tool_specs(declared)
                    except TypeError as error:
                        self.fail(CheckName.MAKE_ENVS, f"env.tools: {error}")
                    break
        strategy = getattr(env, "action_messages", None)
        if callable(strategy):
            own: Any = None
            try:
                own = strategy()
            except Exception as error:
                self.fail(CheckName.MAKE_ENVS, f"action_messages() raised {describe_exception(error)}")
            if own is not None and not isinstance(own, st.SearchStrategy):
                self.fail(
                    CheckName.MAKE_ENVS,
                    f"action_messages() returned a {type(own).__name__}, not a hypothesis strategy",
                )
            elif own is not None:
                self.messages = own if self.messages is None else st.one_of(self.messages, own)

    def run(self) -> None:
        """All checks, in order; a failure that makes later checks meaningless skips them."""
        if self.prepare():
            for i in range(self.config.scripted_episodes):
                if self.stopped:
                    break
                self._scripted_episode(self.config.seed + i, offset=i)
            if not self.stopped:
                self._check_isolation()
            if not self.stopped and self.config.examples > 0:
                self.fuzz(self.config.examples, self.config.seed)
        if CheckName.MAKE_ENVS not in self.failures:
            self._check_cleanup()

    def _build(self, seed: int) -> EnvGroupBuilder | Env | None:
        try:
            made = self.portal.call(resolve_builder, self.source, seed)
            if isinstance(made, SeatedGroupBuilder):  # a multi-seat group: one seat, the others stand-ins
                made = made.alone()
            return made
        except Exception as error:
            self.fail(
                CheckName.MAKE_ENVS,
                f"building the env group (seed {seed}) raised {describe_exception(error)}",
            )
            return None

    def _make_envs(self, made: EnvGroupBuilder | Env) -> Sequence[Env] | None:
        try:
            envs = self.portal.call(make_env_group, made)
        except Exception as error:
            self.fail(CheckName.MAKE_ENVS, f"make_envs() raised {describe_exception(error)}")
            return None
        if not isinstance(envs, Sequence) or isinstance(envs, str):
            self.fail(CheckName.MAKE_ENVS, f"make_envs() returned a {type(envs).__name__}, not a sequence")
            return None
        if not envs:
            self.fail(CheckName.MAKE_ENVS, "make_envs() returned no envs")
            return None
        for i, env in enumerate(envs):
            if not isinstance(env, Env):
                self.fail(CheckName.MAKE_ENVS, f"make_envs()[{i}] is a {type(env).__name__}, not an Env")
                return None
            for method in ("initial_observation", "step"):
                if not inspect.iscoroutinefunction(getattr(env, method)):
                    self.fail(CheckName.MAKE_ENVS, f"{type(env).__name__}.{method} is not async")
                    return None
        if len({id(e) for e in envs}) != len(envs):
            self.fail(
                CheckName.MAKE_ENVS, "make_envs() returned the same Env object twice (envs are single-use)"
            )
            return None
        kinds = sorted({type(e).__name__ for e in envs})
        self.notes[CheckName.MAKE_ENVS] = f"{len(envs)} env(s) of {', '.join(kinds)}"
        return envs

    def _check_initial(self, envs: Sequence[Env]) -> bool:
        lengths: list[int] = []
        for i, env in enumerate(envs):
            try:
                first = self.portal.call(env.initial_observation)
            except Exception as error:
                self.fail(
                    CheckName.INITIAL_OBSERVATION,
                    f"env {i}: initial_observation() raised {describe_exception(error)}",
                )
                return False
            if isinstance(first, InitialObservationOverflow):
                lengths.append(-1)
                continue
            if not isinstance(first, tuple) or len(first) != 2:
                self.fail(
                    CheckName.INITIAL_OBSERVATION,
                    f"env {i}: initial_observation() returned a {type(first).__name__}, "
                    "not (ModelInput, StopCondition) or InitialObservationOverflow",
                )
                return False
            tokens, problem = tokens_problem(first[0], self.vocab, "the initial observation")
            problem = problem or stop_condition_problem(first[1])
            if problem is None and not tokens:
                problem = "the initial observation is empty"
            if problem:
                self.fail(CheckName.INITIAL_OBSERVATION, f"env {i}: {problem}")
                return False
            lengths.append(len(tokens or []))
            if self.initial_stop is None:
                self.initial_stop = first[1]
                self.plan_budget = declared_budget(env, self.config.max_steps)[0]
        shown = ", ".join("overflow" if n < 0 else str(n) for n in lengths[:4])
        self.notes[CheckName.INITIAL_OBSERVATION] = (
            f"prompt tokens per env: {shown}{', …' if len(lengths) > 4 else ''}"
        )
        return True

    # --- episodes ------------------------------------------------------------------------
    async def _step(self, env: Env, action: list[int], extra: dict[str, Any]) -> _StepOutcome:
        monitor = _LagMonitor()
        result: Any = None
        error: BaseException | None = None
        async with anyio.create_task_group() as tg:
            await tg.start(monitor.run)
            try:
                with anyio.move_on_after(self.config.step_timeout_s) as scope:
                    result = await env.step(action, extra=extra)  # type: ignore[arg-type]
                if scope.cancelled_caught:
                    error = TimeoutError(
                        f"step did not return within {self.config.step_timeout_s:g}s (a hang)"
                    )
            except Exception as e:
                error = e
            finally:
                monitor._tick()
                tg.cancel_scope.cancel()
        return _StepOutcome(result, error, monitor.max_gap)

    def play(
        self,
        seed: int,
        next_action: Callable[[int, StopCondition], DrawnAction],
    ) -> None:
        """Play one episode of env 0 of the group built for ``seed``, recording every finding."""
        made = self._build(seed)
        if made is None:
            return
        try:
            envs = self.portal.call(make_env_group, made)
            env = envs[0]
            first = self.portal.call(env.initial_observation)
        except Exception as error:
            self.fail(
                CheckName.MAKE_ENVS,
                f"seed {seed}: building or starting the env raised {describe_exception(error)}",
            )
            self._cleanup_quietly(made)
            return
        self.episodes += 1
        if isinstance(first, InitialObservationOverflow):
            self._cleanup(made)
            return
        observation, stop = first
        obs_tokens = list(observation.to_ints())
        budget, source = declared_budget(env, self.config.max_steps)
        self.budget_seen = (budget, source)
        bound = min(budget, self.config.max_episode_steps)
        renderer = getattr(env, "renderer", None)
        renderer = renderer if isinstance(renderer, Renderer) else self.renderer
        tokenizer = self.tokenizer
        steps = 0
        while True:
            if steps >= bound:
                own = (
                    f"; the checker's own bound max_episode_steps={bound} (an env that never ends "
                    "would hang its rollouts; raise the bound if its episodes are meant to be longer)"
                    if bound < budget
                    else ""
                )
                self.fail(
                    CheckName.EPISODE_BUDGET,
                    f"seed {seed}: episode not over after {steps} steps (budget {budget}, {source}){own}",
                )
                break
            drawn = next_action(steps + 1, stop)
            action = drawn.tokens
            history = getattr(env, "messages", None)
            before = len(history) if isinstance(history, list) else None
            outcome = self.portal.call(self._step, env, action, drawn.extra)
            steps += 1
            self.actions += 1
            self.kinds[drawn.kind] += 1
            what = f"seed {seed}, turn {steps}, action {describe_action(action, tokenizer)}"
            self.max_blocked = max(self.max_blocked, outcome.blocked_s)
            if outcome.blocked_s > self.config.block_threshold_s:
                self.fail(
                    CheckName.NON_BLOCKING,
                    f"step blocked the event loop for {outcome.blocked_s:.2f}s "
                    f"(threshold {self.config.block_threshold_s:g}s): {what}",
                )
            if outcome.error is not None:
                self.crashes += 1
                self.fail(CheckName.NO_RAISE, f"step raised {describe_exception(outcome.error)}; {what}")
                break
            result = outcome.result
            problem = step_result_problem(result, self.vocab)
            if problem:
                self.fail(CheckName.STEP_TYPES, f"{problem}; {what}")
                break
            if not _finite(result.reward):
                self.fail(CheckName.FINITE_REWARDS, f"reward {result.reward!r}; {what}")
            bad_metric = next(((k, v) for k, v in result.metrics.items() if not _finite(v)), None)
            if bad_metric is not None:
                self.fail(CheckName.FINITE_REWARDS, f"metric {bad_metric[0]!r} = {bad_metric[1]!r}; {what}")
            self.rewards.append(float(result.reward))
            for key, value in result.metrics.items():
                if key.startswith(METRIC_FAULT_PREFIX) and value:
                    fault = key[len(METRIC_FAULT_PREFIX) :]
                    self.faults[fault] += 1
                    self.faults_played_on[fault] += int(not result.episode_done)
            if result.episode_done:
                reason = next(
                    (k[5:] for k, v in result.metrics.items() if k.startswith("stop/") and v), "none"
                )
                self.stop_reasons[reason] += 1
                break
            next_tokens = list(result.next_observation.to_ints())
            messages = getattr(env, "messages", None)  # a ChatEnv's conversation refines compaction
            if before is not None and isinstance(messages, list) and len(messages) > before:
                problem = tool_protocol_problem(messages[before:])
                self.tool_turns_checked += int(bool(messages[before].get("tool_calls")))
                if problem:
                    self.fail(CheckName.TOOL_PROTOCOL, f"{problem}; {what}")
            claimed = renderer is not None and extension_expected(
                renderer, steps, messages if isinstance(messages, list) else None
            )
            self.continued_steps += 1
            self.claimed_steps += int(claimed)
            if drawn.clean and claimed:
                report = check_extension(obs_tokens, action, next_tokens, tokenizer)
                self.extension_turns += 1
                self.tool_extension_turns += int(drawn.kind is ActionKind.TOOL_CALL)
                if not report.ok:
                    self.fail(
                        CheckName.EXTENSION,
                        f"seed {seed}, turn {steps} ({type(renderer).__name__}): {report}",
                    )
            obs_tokens, stop = next_tokens, result.next_stop_condition
        self.longest_episode = max(self.longest_episode, steps)
        self._cleanup(made)

    def _scripted_episode(self, seed: int, offset: int) -> None:
        """Clean replies only: for a tool env, a call to each tool in turn (then a malformed
        call, then text), so that multi-turn tool episodes run and the extension is checked."""
        self.play(seed, self._script(offset))

    def _script(self, offset: int) -> Callable[[int, StopCondition], DrawnAction]:
        """The scripted episode's actions: each declared tool's call first (every other script
        also a malformed call), then text replies."""
        assert self.tokenizer is not None
        tokenizer = self.tokenizer
        texts = [t for t in WELL_FORMED_TEXTS if t and not t.startswith(("Guess", "Final"))]
        calls: list[DrawnAction] = []
        if self.renderer is not None and self.tools:
            for spec in self.tools:
                tokens = render_action(self.renderer, example_tool_call(spec, "Let me check."))
                calls.append(DrawnAction(ActionKind.TOOL_CALL, tokens, True))
            broken = malformed_tool_call_action(self.renderer, self.tools[0]) if offset % 2 else None
            if broken is not None:  # every other scripted episode also sends a malformed call
                calls.append(DrawnAction(ActionKind.MALFORMED_TOOL_CALL, broken, False))

        def next_action(turn: int, stop: StopCondition) -> DrawnAction:
            if turn <= len(calls):  # a tool env: each tool's call first, then text replies
                return calls[turn - 1]
            text = texts[(turn - len(calls) + offset) % len(texts)]
            return DrawnAction(ActionKind.WELL_FORMED, well_formed_action(text, tokenizer, stop), True)

        return next_action

    # --- isolation -----------------------------------------------------------------------
    async def _trajectory(self, env: Env, script: Callable[[int, StopCondition], DrawnAction]) -> list[Any]:
        """What ``env`` answers to ``script``: its initial tokens, then (reward, done, tokens)
        per step, within the checker's bounds."""
        first = await env.initial_observation()
        if isinstance(first, InitialObservationOverflow):
            return ["overflow"]
        observation, stop = first
        out: list[Any] = [tuple(observation.to_ints())]
        budget = min(declared_budget(env, self.config.max_steps)[0], self.config.max_episode_steps)
        for turn in range(1, budget + 1):
            drawn = script(turn, stop)
            with anyio.fail_after(self.config.step_timeout_s):
                result = await env.step(drawn.tokens, extra=drawn.extra)  # type: ignore[arg-type]
            out.append((float(result.reward), result.episode_done, tuple(result.next_observation.to_ints())))
            if result.episode_done:
                break
            stop = result.next_stop_condition
        return out

    def _group_trajectory(self, seed: int, play_first: bool) -> list[Any] | None:
        """Env 1's trajectory under the script in a fresh group built for ``seed`` (after env 0
        played the same script when ``play_first``); None for a group of one env."""
        made = self._build(seed)
        if made is None:
            return None
        try:
            envs = self.portal.call(make_env_group, made)
            if len(envs) < 2:
                return None
            if play_first:
                self.portal.call(self._trajectory, envs[0], self._script(0))
            return self.portal.call(self._trajectory, envs[1], self._script(0))
        finally:
            self._cleanup_quietly(made)

    def _check_isolation(self) -> None:
        """Env 1 alone, twice (is it deterministic?), then after env 0 played: a difference is
        state the envs of a group share."""
        seed = self.config.seed
        try:
            alone = self._group_trajectory(seed, play_first=False)
            if alone is None:
                self.skips[CheckName.GROUP_ISOLATION] = "not applicable: the group has one env"
                return
            again = self._group_trajectory(seed, play_first=False)
            after = self._group_trajectory(seed, play_first=True) if again == alone else None
        except Exception as error:  # the episode checks report the env's own errors
            self.skips[CheckName.GROUP_ISOLATION] = (
                f"not run: a scripted episode raised {describe_exception(error)}"
            )
            return
        if again != alone:
            self.skips[CheckName.GROUP_ISOLATION] = (
                f"not applicable: env 1 of two groups built for seed {seed} answered the same actions "
                "differently (not deterministic, or state shared across groups)"
            )
            return
        if after != alone:
            assert after is not None
            turn = next(
                (i for i, (a, b) in enumerate(zip(alone, after, strict=False)) if a != b),
                min(len(alone), len(after)),
            )
            what = "initial observation" if turn == 0 else f"step {turn}"
            self.fail(
                CheckName.GROUP_ISOLATION,
                f"envs of a group share state: env 1 answered the same actions differently after env 0 "
                f"played (seed {seed}, first difference at its {what})",
            )
            return
        self.notes[CheckName.GROUP_ISOLATION] = (
            f"env 1 played {len(alone) - 1} scripted steps the same alone and after env 0"
        )

    def _actions_for(self, stop: StopCondition) -> st.SearchStrategy[DrawnAction]:
        key = tuple(stop)
        if key not in self._strategies:
            assert self.tokenizer is not None
            self._strategies[key] = drawn_actions(
                self.tokenizer,
                stop,
                max_length=self.config.max_action_tokens,
                renderer=self.renderer,
                tools=self.tools,
                messages=self.messages,
            )
        return self._strategies[key]

    def fuzz(self, examples: int, seed: int) -> None:
        """Play ``examples`` hypothesis-drawn episodes (seeded by ``seed``).

        Each example draws its whole plan of actions before the episode starts (the episode
        cycles through the plan if it outlives it): draws never depend on what the env does,
        so hypothesis's generation stays consistent whatever the env returns.
        """
        assert self.initial_stop is not None
        plan_size = max(1, min(self.plan_budget, _MAX_PLAN))
        plans = st.lists(self._actions_for(self.initial_stop), min_size=1, max_size=plan_size)

        @hypothesis_seed(seed)
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=_HEALTH,
            print_blob=False,
            verbosity=Verbosity.quiet,
        )
        @given(episode_seed=st.integers(0, 2**31 - 1), plan=plans)
        def episode(episode_seed: int, plan: list[DrawnAction]) -> None:
            if self.stopped or (self.action_limit is not None and self.actions >= self.action_limit):
                raise _StopFuzz

            def next_action(turn: int, stop: StopCondition) -> DrawnAction:
                return plan[(turn - 1) % len(plan)]

            self.play(episode_seed, next_action)

        with contextlib.suppress(_StopFuzz):
            episode()

    # --- cleanup -------------------------------------------------------------------------
    def _cleanup(self, made: EnvGroupBuilder | Env) -> None:
        if not isinstance(made, EnvGroupBuilder):
            return
        try:
            self.portal.call(made.cleanup)
        except Exception as error:
            self.fail(CheckName.CLEANUP, f"cleanup() raised {describe_exception(error)}")

    def _cleanup_quietly(self, made: EnvGroupBuilder | Env) -> None:
        if isinstance(made, EnvGroupBuilder):
            with contextlib.suppress(Exception):
                self.portal.call(made.cleanup)

    def _check_cleanup(self) -> None:
        made = self._build(self.config.seed)
        if not isinstance(made, EnvGroupBuilder):
            self.skips.setdefault(CheckName.CLEANUP, "not applicable: a single Env has no cleanup()")
            return
        try:
            self.portal.call(make_env_group, made)
        except Exception as error:
            self.fail(CheckName.MAKE_ENVS, f"make_envs() raised {describe_exception(error)}")
            return
        for call in ("first", "second"):
            try:
                self.portal.call(made.cleanup)
            except Exception as error:
                self.fail(CheckName.CLEANUP, f"the {call} cleanup() call raised {describe_exception(error)}")
                return
        self.notes.setdefault(CheckName.CLEANUP, "cleanup() twice after make_envs(): no error")

    # --- report --------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Coverage counters for the report: action kinds, tool calls, extension turns."""
        return {
            "longest_episode": self.longest_episode,
            "stop_reasons": dict(self.stop_reasons),
            "action_kinds": {str(k): v for k, v in sorted(self.kinds.items())},
            "faults": dict(self.faults),
            "faults_played_on": dict(self.faults_played_on),
            "tools": [t["name"] for t in self.tools],
            "tool_calls": self.kinds[ActionKind.TOOL_CALL],
            "malformed_tool_calls": self.kinds[ActionKind.MALFORMED_TOOL_CALL],
            "multi_turn_steps": self.continued_steps,
            "extension_turns": self.extension_turns,
            "extension_turns_after_tool_calls": self.tool_extension_turns,
            "tool_turns_checked": self.tool_turns_checked,
        }

    def results(self) -> tuple[CheckResult, ...]:
        """One result per check: the first failure, else why it did not run (a failure of the
        report unless allowed), else why it does not apply, else the pass evidence."""
        out: list[CheckResult] = []
        defaults = self._pass_details()
        for check in CheckName:
            if check in self.failures:
                out.append(CheckResult(check, Outcome.FAIL, self.failures[check]))
            elif check in self.not_run and check in self.config.allow_skip:
                out.append(CheckResult(check, Outcome.SKIP, f"not run (allowed): {self.not_run[check]}"))
            elif check in self.not_run:
                out.append(CheckResult(check, Outcome.NOT_RUN, self.not_run[check]))
            elif check in self.skips:
                out.append(CheckResult(check, Outcome.SKIP, self.skips[check]))
            elif check in self.notes:
                out.append(CheckResult(check, Outcome.PASS, self.notes[check]))
            elif check in defaults:
                outcome, detail = defaults[check]
                out.append(CheckResult(check, outcome, detail))
            else:
                out.append(CheckResult(check, Outcome.SKIP, "not reached (an earlier check failed)"))
        return tuple(out)

    def _pass_details(self) -> dict[CheckName, tuple[Outcome, str]]:
        if self.actions == 0:
            return {}
        out: dict[CheckName, tuple[Outcome, str]] = {}
        covered = f"{self.actions} actions over {self.episodes} episodes"
        out[CheckName.NO_RAISE] = (Outcome.PASS, covered)
        out[CheckName.STEP_TYPES] = (Outcome.PASS, covered)
        if self.rewards:
            out[CheckName.FINITE_REWARDS] = (
                Outcome.PASS,
                f"rewards in [{min(self.rewards):g}, {max(self.rewards):g}] over {len(self.rewards)} steps",
            )
        if self.budget_seen is not None:
            budget, source = self.budget_seen
            out[CheckName.EPISODE_BUDGET] = (
                Outcome.PASS,
                f"longest episode {self.longest_episode} steps (budget {budget}, {source}); "
                f"stop reasons {dict(self.stop_reasons.most_common(4))}",
            )
        out[CheckName.NON_BLOCKING] = (
            Outcome.PASS,
            f"longest event-loop block {self.max_blocked * 1000:.0f} ms "
            f"(threshold {self.config.block_threshold_s * 1000:.0f} ms)",
        )
        if self.tool_turns_checked:
            out[CheckName.TOOL_PROTOCOL] = (
                Outcome.PASS,
                f"tool calls answered one to one, by id, in the tool role on {self.tool_turns_checked} turns",
            )
        elif not self.tools:
            out[CheckName.TOOL_PROTOCOL] = (Outcome.SKIP, "not applicable: the env declares no tools")
        else:
            out[CheckName.TOOL_PROTOCOL] = (
                Outcome.SKIP,
                "not checked: no tool call was followed by a continued turn of an env that keeps "
                "its conversation at env.messages",
            )
        if self.extension_turns:
            tools = f" ({self.tool_extension_turns} after tool calls)" if self.tools else ""
            out[CheckName.EXTENSION] = (
                Outcome.PASS,
                f"held on {self.extension_turns} turns of clean replies{tools}",
            )
        else:
            out[CheckName.EXTENSION] = self._extension_not_checked()
        return out

    def _extension_not_checked(self) -> tuple[Outcome, str]:
        """Why no extension check ran: not applicable (declared), or not run (a coverage gap)."""
        budget = self.budget_seen[0] if self.budget_seen is not None else None
        if self.stopped:
            return Outcome.SKIP, "not reached (the run stopped at the first failure)"
        if self.renderer is None:
            return Outcome.NOT_RUN, "the env exposes no .renderer: pass --renderer NAME (or renderer=)"
        if budget == 1:
            return Outcome.SKIP, "not applicable: the env declares one turn per episode"
        if self.continued_steps and not self.claimed_steps:
            return (
                Outcome.SKIP,
                f"not applicable: {type(self.renderer).__name__} claims the extension property on none of "
                f"{self.continued_steps} continued turns (it re-renders history)",
            )
        if not self.continued_steps:
            hint = (
                "declare the tools it answers (tools=) or the messages worth drawing (action_messages())"
                if not self.tools and self.messages is None
                else "no drawn reply continued the game"
            )
            return Outcome.NOT_RUN, f"every episode ended after its first action: {hint}"
        return (
            Outcome.NOT_RUN,
            "no clean reply was followed by an observation where the renderer claims extension",
        )


def make_renderer(renderer_name: str | None, model_name: str | None = None) -> Renderer:
    """The renderer ``renderer_name`` on ``model_name``'s tokenizer, for an env that keeps its
    renderer elsewhere than ``.renderer`` (``--renderer`` / ``--model`` of ``python -m envs.check``).

    ``model_name`` None: the embedded SmolLM2; ``renderer_name`` None: the model's recommended
    renderer. The embedded models' tokenizers are registered first (offline)."""
    from backend.model import SMOLLM2, register_tokenizers
    from renderers_ext import load_renderer

    register_tokenizers()
    return load_renderer(renderer_name, model_name or SMOLLM2)


def check_conformance(
    source: EnvSource, config: CheckConfig | None = None, *, target: str | None = None
) -> ConformanceReport:
    """Run every :class:`CheckName` check on ``source`` and return the report.

    Args:
        source: an ``EnvGroupBuilder``, an ``RLDataset`` or an env factory (see
            :func:`envs.gym._adapter.resolve_builder`; a factory gets the episode seed).
        config: knobs (:class:`CheckConfig`).
        target: the name shown in the report (default: a repr of ``source``).
    """
    config = config or CheckConfig()
    start = time.monotonic()
    with start_blocking_portal() as portal:
        run = ConformanceRun(portal, source, config)
        run.run()
    return ConformanceReport(
        target=target or _name(source),
        results=run.results(),
        actions=run.actions,
        episodes=run.episodes,
        crashes=run.crashes,
        seconds=time.monotonic() - start,
        stats=run.stats(),
    )


@dataclass(frozen=True)
class FuzzStats:
    """What a fuzz run covered and what broke."""

    target: str
    """What was fuzzed."""
    actions: int
    """Actions stepped."""
    episodes: int
    """Episodes played."""
    crashes: int
    """Steps that raised or hung."""
    failures: dict[str, str]
    """The first failure of each check that failed (check name to detail)."""
    seconds: float
    """Wall-clock duration."""
    stats: dict[str, Any] = field(default_factory=dict)
    """Coverage counters (action kinds, faults, tool calls; see :class:`ConformanceReport`)."""

    @property
    def line(self) -> str:
        """``actions=<n> crashes=<m>`` (the bench's last line)."""
        return f"actions={self.actions} crashes={self.crashes}"


def fuzz_env(
    source: EnvSource,
    actions: int = 10_000,
    *,
    seed: int = 0,
    config: CheckConfig | None = None,
    target: str | None = None,
) -> FuzzStats:
    """Step at least ``actions`` hypothesis-drawn actions through fresh episodes of ``source``,
    never stopping at a failure; count crashes (steps that raise or hang) and other failures."""
    config = replace(config or CheckConfig(), fail_fast=False, seed=seed)
    start = time.monotonic()
    with start_blocking_portal() as portal:
        run = ConformanceRun(portal, source, config)
        run.action_limit = actions
        if run.prepare():
            round_ = 0
            while run.actions < actions:
                per_episode = run.actions / run.episodes if run.episodes else 2.0
                remaining = actions - run.actions
                examples = max(5, min(2000, math.ceil(remaining / max(per_episode, 1.0))))
                before = run.actions
                run.fuzz(examples, seed + round_)
                round_ += 1
                if run.actions == before:  # nothing playable (e.g. every prompt overflows)
                    break
    return FuzzStats(
        target=target or _name(source),
        actions=run.actions,
        episodes=run.episodes,
        crashes=run.crashes,
        failures={str(k): v for k, v in run.failures.items()},
        seconds=time.monotonic() - start,
        stats=run.stats(),
    )


def _name(source: Any) -> str:
    name = getattr(source, "__qualname__", None) or type(source).__qualname__
    module = getattr(source, "__module__", None) or type(source).__module__
    return f"{module}:{name}"
