"""The token-in/token-out chat environment every TurnGym env is built on.

Abstractions:

- :class:`ChatEnv`: a ``tinker_cookbook.rl.types.Env`` for multi-turn chat. A subclass writes
  only the game: :meth:`ChatEnv.initial_messages` and :meth:`ChatEnv.on_message` (given the
  parsed assistant message, return a :class:`Reply`). The base keeps the token history.
- :class:`Reply`: what the game answers to one assistant message (new messages, reward, done).
- :class:`Fault`: a defect of a sampled action the base handles before the game sees it
  (truncated, unparseable, invalid UTF-8, empty, a malformed tool call); :class:`FaultPolicy`
  says what each costs.
- :class:`EnvLimits`: turn and token budgets.

Tool-using games declare their tools (``tools=`` of :class:`ChatEnv`, OpenAI function specs as
the cookbook's ``ToolSpec``): :meth:`ChatEnv.tool_prompt` renders them in the renderer's own
format, the game answers ``message["tool_calls"]`` with ``role: "tool"`` messages, and the
conformance checker draws well-formed and malformed calls to them. A game can also declare
assistant messages worth drawing (:meth:`ChatEnv.action_messages`, a hypothesis strategy).

Token-in/token-out: the next observation is the previous observation + the exact sampled action
tokens + the rendering of the new messages only, so nothing the model saw or produced is ever
re-tokenised. When the renderer lacks the extension property (or a compaction is due, see
``renderers_ext.CompactingRenderer``) the base re-renders the whole conversation instead and
counts it (:attr:`ChatEnv.rerenders`; the rollout engine marks the transition whose next
observation does not extend, ``rollout/ext_break``). A ``ChatEnv`` honours the rollout
engine's compaction requests (``rollout.SupportsCompaction``, through
:meth:`ChatEnv.set_compaction_period`). Single-turn problems are the degenerate case:
:meth:`ChatEnv.on_message` returns ``Reply(done=True, reward=...)``.
"""

from __future__ import annotations

import inspect
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING

import tinker
from tinker_cookbook.completers import StopCondition
from tinker_cookbook.renderers import Message, Renderer, ToolSpec
from tinker_cookbook.renderers.base import ParseFailureKind, classify_parse_failure
from tinker_cookbook.rl.types import (
    STOP_METRIC_PREFIX,
    Action,
    ActionExtra,
    Env,
    InitialObservationOverflow,
    Metrics,
    Observation,
    StepResult,
    StopReason,
)

from renderers_ext import (
    CompactingRenderer,
    extension_expected,
    is_valid_utf8,
    prompt_tokens,
    render_continuation,
    stop_overlap,
    stop_token_sequences,
)

if TYPE_CHECKING:  # hypothesis is imported only by envs that declare a strategy
    from hypothesis.strategies import SearchStrategy

METRIC_FAULT_PREFIX = "turngym/fault/"
"""Prefix of one-hot metrics naming the :class:`Fault` of a step."""


class Fault(StrEnum):
    """A defect of a sampled action, handled by the base before the game sees the message."""

    TRUNCATED = "truncated"
    """The sampler hit ``max_tokens`` (``extra["stop_reason"] == "length"``)."""
    EMPTY = "empty"
    """No tokens were sampled."""
    INVALID_UTF8 = "invalid_utf8"
    """The tokens do not decode to valid UTF-8."""
    MALFORMED = "malformed"
    """The renderer could not parse the tokens into a clean message."""
    MALFORMED_TOOL_CALL = "malformed_tool_call"
    """The message ended cleanly but a tool call in it could not be parsed (the renderer's
    ``unparsed_tool_calls``, e.g. invalid JSON arguments); envs that declare tools only (for
    the others it is text). Unless the game opts in (by
    overriding :meth:`ChatEnv.on_fault`) it never sees such a message: a policy that does not
    end the episode answers each malformed call with a ``tool`` error message instead."""


_FAULT_STOP_REASON: dict[Fault, StopReason] = {
    Fault.TRUNCATED: StopReason.MAX_TOKENS,
    Fault.EMPTY: StopReason.PARSE_ERROR,
    Fault.INVALID_UTF8: StopReason.PARSE_ERROR,
    Fault.MALFORMED: StopReason.PARSE_ERROR,
    Fault.MALFORMED_TOOL_CALL: StopReason.PARSE_ERROR,
}
_CLEAN_FAULTS = (None, Fault.TRUNCATED, Fault.MALFORMED_TOOL_CALL)
"""Faults after which the sampled tokens stay verbatim in the history (the turn ended cleanly,
or was closed with the end-of-turn token)."""


@dataclass(frozen=True)
class FaultPolicy:
    """Reward of a faulty action, and whether it ends the episode (default: it does).

    When ``end_episode`` is False the game's :meth:`ChatEnv.on_fault` decides what comes next
    (the default passes the parsed message on to :meth:`ChatEnv.on_message`).
    """

    reward: float = 0.0
    """Reward added on a faulty step."""
    end_episode: bool = True
    """End the episode on a fault, with the fault's stop reason."""


@dataclass(frozen=True)
class EnvLimits:
    """Budgets of one episode; each ends it with the matching ``StopReason``."""

    max_turns: int = 10
    """Assistant turns before ``StopReason.MAX_TURNS``."""
    max_trajectory_tokens: int | None = None
    """Observation length cap: an initial prompt over it overflows (``MAX_TOKENS``), a later
    observation over it ends the episode with ``CONTEXT_OVERFLOW``."""


@dataclass(frozen=True)
class Reply:
    """The game's answer to one assistant message."""

    messages: Sequence[Message] = ()
    """New messages to append (user, tool, system...). Rendered after the sampled tokens."""
    reward: float = 0.0
    """Reward of this step."""
    done: bool = False
    """Whether the episode ends here."""
    metrics: Metrics = field(default_factory=dict)
    """Numeric per-step metrics (aggregated by the trainer)."""
    logs: dict[str, str | int | float] = field(default_factory=dict)
    """Diagnostics for transcripts (not aggregated)."""
    stop_reason: StopReason = StopReason.COMPLETED
    """Why the episode ends, when ``done``."""


@dataclass(frozen=True)
class TurnEnd:
    """How one step ended, for a game's own counters (:meth:`ChatEnv.on_turn_end`)."""

    fault: Fault | None
    """The step's :class:`Fault`, if any."""
    played: bool
    """The game played the message (the base called :meth:`ChatEnv.on_message` for it)."""
    stop_reason: StopReason | None
    """Why the episode ended at this step; None when it goes on."""


def decode_action(
    renderer: Renderer, action: Action, *, tool_calls: bool = True
) -> tuple[Message | None, Fault | None]:
    """Parse sampled tokens into a message, or say which :class:`Fault` prevents it.

    With ``tool_calls`` (an env that declares tools) a tool call the renderer could not parse
    is :attr:`Fault.MALFORMED_TOOL_CALL`; without, tool-call-like text is just text.
    """
    if not action:
        return None, Fault.EMPTY
    if not is_valid_utf8(renderer.tokenizer, action):
        return None, Fault.INVALID_UTF8
    try:
        message, termination = renderer.parse_response(list(action))
    except Exception:  # a renderer that raises on garbage is one more malformed parse
        return None, Fault.MALFORMED
    failure = classify_parse_failure(message, termination)
    if failure is not None:
        kind, _detail = failure
        if kind is ParseFailureKind.STRUCTURAL:
            return message, Fault.MALFORMED
        if tool_calls:
            return message, Fault.MALFORMED_TOOL_CALL
    return message, None


class ChatEnv(Env):
    """A multi-turn chat env with token-in/token-out history. Subclass and write the game.

    Args:
        renderer: a tinker-cookbook renderer (possibly a ``CompactingRenderer``).
        limits: turn and token budgets.
        faults: what a faulty action costs, per :class:`Fault` (missing kinds use the default).
        tools: the tools the policy may call (``ToolSpec``: name, description, JSON-schema
            parameters); :meth:`tool_prompt` renders them, the conformance checker draws calls.
    """

    def __init__(
        self,
        renderer: Renderer,
        *,
        limits: EnvLimits | None = None,
        faults: dict[Fault, FaultPolicy] | None = None,
        tools: Sequence[ToolSpec] = (),
    ):
        self.renderer = renderer
        self.limits = limits or EnvLimits()
        self.faults = faults or {}
        self.tools: list[ToolSpec] = list(tools)
        """The tools this game answers (empty for a text-only game)."""
        self.messages: list[Message] = []
        """The conversation as messages (assistant turns as parsed)."""
        self.turn = 0
        """Number of assistant turns taken so far."""
        self.rerenders = 0
        """How many observations were re-rendered in full instead of extended."""
        self._tokens: list[int] = []
        self._turn_end = TurnEnd(fault=None, played=False, stop_reason=None)  # of the step running

    # --- the game ------------------------------------------------------------------------
    @abstractmethod
    def initial_messages(self) -> list[Message]:
        """The conversation before the first assistant turn."""

    @abstractmethod
    async def on_message(self, message: Message) -> Reply:
        """React to one parsed assistant message."""

    async def on_fault(self, fault: Fault, message: Message | None) -> Reply:
        """Called for a fault whose policy does not end the episode. Default: a malformed tool
        call is answered with a ``tool`` error message per call (the game does not see it);
        otherwise game as usual when a message could be parsed, else end the episode."""
        if fault is Fault.MALFORMED_TOOL_CALL and message is not None:
            return Reply(messages=malformed_tool_call_errors(message))
        if message is not None:
            return await self._play(message)
        return Reply(done=True, stop_reason=_FAULT_STOP_REASON[fault])

    def on_turn_end(self, turn: TurnEnd) -> None:
        """Called at the end of every step with how it ended (its fault, whether the game played
        the message, the stop reason), for a game that keeps its own turn or fault counters.
        Default: nothing."""

    # --- compaction seam (rollout.SupportsCompaction) ------------------------------------
    def set_compaction_period(self, period: int) -> None:
        """Compact the history every ``period`` assistant turns: the renderer becomes
        ``CompactingRenderer(renderer, period)`` (a compacting renderer gets the new period).
        Call before :meth:`initial_observation` (the rollout engine does, at rollout start)."""
        if self._tokens:
            raise RuntimeError("set_compaction_period must be called before the episode starts")
        base = self.renderer.base if isinstance(self.renderer, CompactingRenderer) else self.renderer
        if isinstance(self.renderer, CompactingRenderer) and self.renderer.period == period:
            return
        self.renderer = CompactingRenderer(base, period)

    def tool_prompt(self, system_prompt: str = "") -> list[Message]:
        """The messages that declare :attr:`tools` in the renderer's own format (and the system
        prompt), to start :meth:`initial_messages` with."""
        if not self.tools:
            return [{"role": "system", "content": system_prompt}] if system_prompt else []
        return list(self.renderer.create_conversation_prefix_with_tools(self.tools, system_prompt))

    def action_messages(self) -> SearchStrategy[Message] | None:
        """Assistant messages worth drawing for this game (a hypothesis strategy), besides the
        tool calls the checker draws from :attr:`tools`; None (the default) for none."""
        return None

    # --- Env -----------------------------------------------------------------------------
    @property
    def stop_condition(self) -> StopCondition:
        """Stop sequences for sampling (the renderer's)."""
        return self.renderer.get_stop_sequences()

    @property
    def observation_tokens(self) -> list[int]:
        """The current observation as tokens (a copy)."""
        return list(self._tokens)

    async def initial_observation(self) -> tuple[Observation, StopCondition] | InitialObservationOverflow:
        self.messages = list(self.initial_messages())
        self._tokens = prompt_tokens(self.renderer, self.messages)
        cap = self.limits.max_trajectory_tokens
        if cap is not None and len(self._tokens) > cap:
            return InitialObservationOverflow(
                reward=0.0,
                metrics={f"{STOP_METRIC_PREFIX}{StopReason.MAX_TOKENS}": 1.0},
                logs={"overflow": f"initial prompt has {len(self._tokens)} tokens > {cap}"},
            )
        return tinker.ModelInput.from_ints(self._tokens), self.stop_condition

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        self._turn_end = TurnEnd(fault=None, played=False, stop_reason=None)
        result = await self._chat_step(list(action), extra)
        self.on_turn_end(self._turn_end)
        return result

    async def _chat_step(self, action: list[int], extra: ActionExtra | None) -> StepResult:
        prev_len = len(self._tokens)
        self.turn += 1
        message, fault = decode_action(self.renderer, action, tool_calls=bool(self.tools))
        if message is not None:
            message = name_tool_calls(message, self.turn)
        # a sample cut by max_tokens lacks its stop token (so it also parses as malformed) and may
        # end mid-character (invalid UTF-8): truncated wins
        if (
            fault in (None, Fault.MALFORMED, Fault.INVALID_UTF8)
            and extra is not None
            and extra.get("stop_reason") == "length"
        ):
            fault = Fault.TRUNCATED
        metrics: Metrics = {}
        fault_reward = 0.0
        self._turn_end = replace(self._turn_end, fault=fault)
        if fault is not None:
            policy = self.faults.get(fault, FaultPolicy())
            metrics[f"{METRIC_FAULT_PREFIX}{fault}"] = 1.0
            fault_reward = policy.reward
            if policy.end_episode:
                return self._finish(action, fault_reward, _FAULT_STOP_REASON[fault], metrics)
            reply = await _checked_reply(self, "on_fault", self.on_fault(fault, message))
        else:
            assert message is not None
            reply = await self._play(message)
        metrics.update(reply.metrics)
        reward = reply.reward + fault_reward
        start = len(self.messages)
        self.messages.append(message if message is not None else {"role": "assistant", "content": ""})
        if reply.done:
            return self._finish(action, reward, reply.stop_reason, metrics, reply)
        if self.turn >= self.limits.max_turns:
            return self._finish(action, reward, StopReason.MAX_TURNS, metrics, reply)

        self.messages.extend(reply.messages)
        if fault in _CLEAN_FAULTS and extension_expected(self.renderer, self.turn, self.messages):
            # a truncated turn the game plays on is closed with the end-of-turn token(s), as an
            # observation token: the sampled tokens stay verbatim and the prefix still holds
            closed = action + (self._end_of_turn() if fault is Fault.TRUNCATED else [])
            new = render_continuation(self.renderer, self.messages, start + 1)
            overlap = stop_overlap(closed, new, stop=stop_token_sequences(self.renderer))
            self._tokens = self._tokens + closed + new[overlap:]
        else:
            self._tokens = prompt_tokens(self.renderer, self.messages)
            self.rerenders += 1
        cap = self.limits.max_trajectory_tokens
        if cap is not None and len(self._tokens) > cap:
            return self._finish(action, reward, StopReason.CONTEXT_OVERFLOW, metrics, reply)
        metrics["turngym/ob_tokens_added"] = float(len(self._tokens) - prev_len - len(action))
        return StepResult(
            reward=reward,
            episode_done=False,
            next_observation=tinker.ModelInput.from_ints(self._tokens),
            next_stop_condition=self.stop_condition,
            metrics=metrics,
            logs=dict(reply.logs),
        )

    async def _play(self, message: Message) -> Reply:
        """The game's :meth:`on_message` for this step's message (recorded as played)."""
        self._turn_end = replace(self._turn_end, played=True)
        return await _checked_reply(self, "on_message", self.on_message(message))

    def _end_of_turn(self) -> list[int]:
        """Tokens that close an assistant turn: the renderer's first stop sequence."""
        stop = self.stop_condition
        if not stop:
            return []
        if isinstance(stop[0], int):
            return [stop[0]]
        return list(self.renderer.tokenizer.encode(stop[0], add_special_tokens=False))

    def _finish(
        self,
        action: Action,
        reward: float,
        reason: StopReason,
        metrics: Metrics,
        reply: Reply | None = None,
    ) -> StepResult:
        metrics = {**metrics, f"{STOP_METRIC_PREFIX}{reason}": 1.0}
        self._turn_end = replace(self._turn_end, stop_reason=reason)
        self._tokens = self._tokens + action
        return StepResult(
            reward=reward,
            episode_done=True,
            next_observation=tinker.ModelInput.empty(),
            next_stop_condition=self.stop_condition,
            metrics=metrics,
            logs=dict(reply.logs) if reply else {},
        )


def name_tool_calls(message: Message, turn: int) -> Message:
    """``message`` with an id on each tool call that has none (``call_<turn>_<i>``), so that
    the game can answer each call by id (``tool_call_id``) even with a renderer whose format
    carries no ids (Qwen3's parse gives ``id=None``). Calls that have an id keep it."""
    calls = message.get("tool_calls")
    if not calls or all(call.id for call in calls):
        return message
    named = [
        call if call.id else call.model_copy(update={"id": f"call_{turn}_{i}"}) for i, call in enumerate(calls)
    ]
    return {**message, "tool_calls": named}


def malformed_tool_call_errors(message: Message) -> list[Message]:
    """One ``tool`` error message per malformed tool call of ``message`` (what the base answers
    to :attr:`Fault.MALFORMED_TOOL_CALL` when the episode goes on)."""
    return [
        {
            "role": "tool",
            "content": f"error: malformed tool call, no tool ran ({bad.error[:200]})",
        }
        for bad in message.get("unparsed_tool_calls") or []
    ]


async def _checked_reply(env: ChatEnv, method: str, reply: object) -> Reply:
    """Await a game method's result and say clearly when it is not a :class:`Reply`."""
    if not inspect.isawaitable(reply):
        raise TypeError(
            f"{type(env).__name__}.{method} must be async (async def) and return a Reply, "
            f"got {type(reply).__name__}"
        )
    result = await reply
    if not isinstance(result, Reply):
        raise TypeError(f"{type(env).__name__}.{method} must return a Reply, got {type(result).__name__}")
    return result
