"""Deliberately broken envs: each breaks one property the conformance checker must catch.

Also one correct reference env (:class:`EchoGroup`), the baseline the broken ones differ from.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import tinker
from tinker_cookbook.completers import StopCondition
from tinker_cookbook.renderers import Message, ToolSpec, get_text_content
from tinker_cookbook.renderers.qwen3 import Qwen3InstructRenderer
from tinker_cookbook.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    InitialObservationOverflow,
    Observation,
    StepResult,
)

from backend.model import SMOLLM2
from envs import ChatEnv, EnvLimits, Reply
from renderers_ext import CompactingRenderer, load_renderer


class EchoEnv(ChatEnv):
    """A correct multi-turn ChatEnv: the user echoes the reply; ``stop`` ends it with reward 1."""

    def __init__(self, max_turns: int = 4, renderer_name: str = "qwen3_instruct", compaction_period: int = 0):
        renderer = load_renderer(renderer_name, SMOLLM2)
        if compaction_period:
            renderer = CompactingRenderer(renderer, compaction_period)
        super().__init__(renderer, limits=EnvLimits(max_turns=max_turns))

    def initial_messages(self) -> list[Message]:
        return [{"role": "user", "content": "Say anything; say 'stop' to finish."}]

    async def on_message(self, message: Message) -> Reply:
        text = get_text_content(message)
        if text.strip().lower() == "stop":
            return Reply(reward=1.0, done=True)
        return Reply(messages=[{"role": "user", "content": f"You said: {text[:40]}"}], reward=0.1)


@dataclass(frozen=True)
class EchoGroup(EnvGroupBuilder):
    """Builds ``size`` :class:`EchoEnv` s. Conforms."""

    size: int = 2
    max_turns: int = 4
    renderer_name: str = "qwen3_instruct"
    compaction_period: int = 0

    async def make_envs(self) -> Sequence[Env]:
        return [EchoEnv(self.max_turns, self.renderer_name, self.compaction_period) for _ in range(self.size)]


# --- a raising step ----------------------------------------------------------------------
class RaisingEnv(EchoEnv):
    """Checks for the end-of-turn with ``action[-1]``: an empty action raises IndexError."""

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if action[-1] != 2:  # the bug: fails on []
            action = [*action, 2]
        return await super().step(action, extra=extra)


@dataclass(frozen=True)
class RaisingGroup(EnvGroupBuilder):
    """Builds one :class:`RaisingEnv`."""

    async def make_envs(self) -> Sequence[Env]:
        return [RaisingEnv()]


# --- an unpicklable builder -------------------------------------------------------------
@dataclass(frozen=True)
class UnpicklableGroup(EnvGroupBuilder):
    """Holds a lock (as a builder holding a client or a file handle would): cannot be pickled."""

    lock: Any = field(default_factory=threading.Lock)

    async def make_envs(self) -> Sequence[Env]:
        return [EchoEnv()]


# --- a renderer whose prefix breaks -----------------------------------------------------
class TurnCountingRenderer(Qwen3InstructRenderer):
    """Claims the extension property but prepends a system line with the turn count, so every
    prompt changes its own beginning."""

    def build_generation_prompt(
        self, messages: list[Message], role: Any = "assistant", prefill: str | None = None
    ):
        turns = sum(1 for m in messages if m["role"] == "assistant")
        header: Message = {"role": "system", "content": f"Turns so far: {turns}"}
        return super().build_generation_prompt([header, *messages], role, prefill)


class RerenderingEnv(Env):
    """Re-renders the whole conversation each turn (as the cookbook's envs do) with
    :class:`TurnCountingRenderer`: the next observation does not extend the previous one."""

    def __init__(self, max_turns: int = 3):
        self.renderer = TurnCountingRenderer(load_renderer("qwen3_instruct", SMOLLM2).tokenizer)
        self.messages: list[Message] = [{"role": "user", "content": "Talk to me."}]
        self.max_turns = max_turns
        self.turn = 0

    @property
    def stop_condition(self) -> StopCondition:
        return self.renderer.get_stop_sequences()

    async def initial_observation(self) -> tuple[tinker.ModelInput, StopCondition]:
        return self.renderer.build_generation_prompt(self.messages), self.stop_condition

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        message, _ = self.renderer.parse_response(list(action))
        self.turn += 1
        self.messages += [
            {"role": "assistant", "content": get_text_content(message)},
            {"role": "user", "content": "Go on."},
        ]
        done = self.turn >= self.max_turns
        return StepResult(
            reward=0.0,
            episode_done=done,
            next_observation=tinker.ModelInput.empty()
            if done
            else self.renderer.build_generation_prompt(self.messages),
            next_stop_condition=self.stop_condition,
            metrics={"stop/max_turns": 1.0} if done else {},
        )


@dataclass(frozen=True)
class RerenderingGroup(EnvGroupBuilder):
    """Builds one :class:`RerenderingEnv`."""

    async def make_envs(self) -> Sequence[Env]:
        return [RerenderingEnv()]


# --- a blocking step --------------------------------------------------------------------
BLOCK_SECONDS = 2.0
"""How long :class:`BlockingEnv` blocks the event loop on its first step."""


class BlockingEnv(EchoEnv):
    """Does synchronous I/O (``time.sleep``) inside ``async def step`` on its first turn."""

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if self.turn == 0:
            time.sleep(BLOCK_SECONDS)  # the bug: should be `await anyio.sleep(...)` or a thread
        return await super().step(action, extra=extra)


@dataclass(frozen=True)
class BlockingGroup(EnvGroupBuilder):
    """Builds one :class:`BlockingEnv`."""

    async def make_envs(self) -> Sequence[Env]:
        return [BlockingEnv()]


# --- more broken behaviours -------------------------------------------------------------
class NanRewardEnv(EchoEnv):
    """Divides by the reply length: the empty reply (the stop token alone) gets a NaN reward."""

    async def on_message(self, message: Message) -> Reply:
        text = get_text_content(message)
        return Reply(reward=float("nan") if not text else 1.0 / len(text), done=True)


@dataclass(frozen=True)
class NanRewardGroup(EnvGroupBuilder):
    """Builds one :class:`NanRewardEnv`."""

    async def make_envs(self) -> Sequence[Env]:
        return [NanRewardEnv(max_turns=1)]  # single-turn: the extension check does not apply


class EndlessEnv(EchoEnv):
    """Declares 3 turns but forgets to enforce them (``on_message`` never ends, limits ignored)."""

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        self.turn = 0  # the bug: resets the counter that enforces limits.max_turns
        return await super().step(action, extra=extra)


@dataclass(frozen=True)
class EndlessGroup(EnvGroupBuilder):
    """Builds one :class:`EndlessEnv` (declared budget 3 turns)."""

    async def make_envs(self) -> Sequence[Env]:
        return [EndlessEnv(max_turns=3)]


@dataclass(frozen=True)
class FlakyCleanupGroup(EnvGroupBuilder):
    """``cleanup`` closes a resource and fails when called a second time."""

    state: dict[str, bool] = field(default_factory=dict)

    async def make_envs(self) -> Sequence[Env]:
        self.state["open"] = True
        return [EchoEnv()]

    async def cleanup(self) -> None:
        if not self.state.pop("open"):  # the bug: KeyError on the second call
            raise RuntimeError("unreachable")


class HangingEnv(EchoEnv):
    """Awaits an event nobody sets: the step never returns."""

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        import anyio

        await anyio.Event().wait()
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class HangingGroup(EnvGroupBuilder):
    """Builds one :class:`HangingEnv`."""

    async def make_envs(self) -> Sequence[Env]:
        return [HangingEnv()]


# --- an env that keeps its renderer elsewhere --------------------------------------------
class HiddenRendererEnv(Env):
    """A correct env that wraps an :class:`EchoEnv` at ``.inner`` (like a cookbook env whose
    renderer is not at ``.renderer``): the checker finds no tokenizer by itself."""

    def __init__(self) -> None:
        self.inner = EchoEnv()

    @property
    def stop_condition(self) -> StopCondition:
        return self.inner.stop_condition

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        first = await self.inner.initial_observation()
        assert not isinstance(first, InitialObservationOverflow)
        return first

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        return await self.inner.step(action, extra=extra)


@dataclass(frozen=True)
class HiddenRendererGroup(EnvGroupBuilder):
    """Builds two :class:`HiddenRendererEnv` s."""

    async def make_envs(self) -> Sequence[Env]:
        return [HiddenRendererEnv(), HiddenRendererEnv()]


# --- a tool env ----------------------------------------------------------------------------
LOOKUP_TOOL = {
    "name": "lookup",
    "description": "Number of an item in stock.",
    "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
}


class ToolEnv(ChatEnv):
    """Answers ``lookup`` calls with a tool message; a text reply ends it (reward 1 when it
    names the stock after a lookup). ``declare=False`` hides the tool from the checker."""

    def __init__(self, declare: bool = True):
        super().__init__(load_renderer("qwen3_instruct", SMOLLM2), limits=EnvLimits(max_turns=5), tools=[LOOKUP_TOOL])
        self.prompt = self.tool_prompt()
        if not declare:
            self.tools = []
        self.looked_up = False

    def initial_messages(self) -> list[Message]:
        return [*self.prompt, {"role": "user", "content": "How many pens are in stock?"}]

    async def on_message(self, message: Message) -> Reply:
        calls = message.get("tool_calls") or []
        if calls:
            self.looked_up = True
            return Reply(messages=[{"role": "tool", "content": "3", "tool_call_id": c.id or ""} for c in calls])
        return Reply(done=True, reward=float(self.looked_up and "3" in get_text_content(message)))


@dataclass(frozen=True)
class ToolGroup(EnvGroupBuilder):
    """Builds one :class:`ToolEnv`."""

    declare: bool = True

    async def make_envs(self) -> Sequence[Env]:
        return [ToolEnv(self.declare)]


# --- tool-protocol and isolation bugs ----------------------------------------------------------
class NoCallIdToolEnv(ToolEnv):
    """Answers each call in the tool role but drops its ``tool_call_id``."""

    async def on_message(self, message: Message) -> Reply:
        calls = message.get("tool_calls") or []
        if calls:
            return Reply(messages=[{"role": "tool", "content": "3"} for _ in calls])
        return Reply(done=True)


class UserRoleToolEnv(ToolEnv):
    """Sends tool results back as ``user`` messages."""

    async def on_message(self, message: Message) -> Reply:
        if message.get("tool_calls"):
            return Reply(messages=[{"role": "user", "content": "lookup says 3"}])
        return Reply(done=True)


class UnansweredToolEnv(ToolEnv):
    """Leaves the tool calls unanswered and plays on (a ``system`` note instead of results)."""

    async def on_message(self, message: Message) -> Reply:
        if message.get("tool_calls"):
            return Reply(messages=[{"role": "system", "content": "Keep going."}])
        return Reply(done=True)


@dataclass(frozen=True)
class ToolBugGroup(EnvGroupBuilder):
    """Builds one tool env with the planted bug ``bug`` (``no_id``, ``user_role``, ``unanswered``)."""

    bug: str = "no_id"

    async def make_envs(self) -> Sequence[Env]:
        kinds = {"no_id": NoCallIdToolEnv, "user_role": UserRoleToolEnv, "unanswered": UnansweredToolEnv}
        return [kinds[self.bug]()]


STORE_TOOL: ToolSpec = {
    "name": "take",
    "description": "Take one item from the shared shelf; says how many are left.",
    "parameters": {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]},
}


class ShelfEnv(ChatEnv):
    """A stateful tool env: ``take`` removes an item from ``shelf`` and says what is left."""

    def __init__(self, shelf: dict[str, int]):
        super().__init__(load_renderer("qwen3_instruct", SMOLLM2), limits=EnvLimits(max_turns=4), tools=[STORE_TOOL])
        self.shelf = shelf
        self.prompt = self.tool_prompt()

    def initial_messages(self) -> list[Message]:
        return [*self.prompt, {"role": "user", "content": "Take a pen."}]

    async def on_message(self, message: Message) -> Reply:
        calls = message.get("tool_calls") or []
        if not calls:
            return Reply(done=True, reward=float(self.shelf["pen"] < 5))
        self.shelf["pen"] -= len(calls)
        return Reply(
            messages=[
                {"role": "tool", "content": f"{self.shelf['pen']} left", "tool_call_id": c.id or ""} for c in calls
            ]
        )


@dataclass(frozen=True)
class SharedShelfGroup(EnvGroupBuilder):
    """Gives every env of the group ONE shelf dict (the bug); ``shared=False`` gives each its own."""

    shared: bool = True

    async def make_envs(self) -> Sequence[Env]:
        shelf = {"pen": 5}
        return [ShelfEnv(shelf if self.shared else dict(shelf)) for _ in range(2)]


class ForeverEnv(EchoEnv):
    """Declares a huge turn budget and never ends (every reply is echoed)."""

    def __init__(self) -> None:
        super().__init__(max_turns=10**9)

    async def on_message(self, message: Message) -> Reply:
        return Reply(messages=[{"role": "user", "content": "Again."}])


@dataclass(frozen=True)
class ForeverGroup(EnvGroupBuilder):
    """Builds one :class:`ForeverEnv`."""

    async def make_envs(self) -> Sequence[Env]:
        return [ForeverEnv()]
