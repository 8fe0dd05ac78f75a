"""Judge-based environments: rubric-graded and pairwise-preference chats, single- or multi-turn.

- :func:`grade` and :class:`RubricGrade`: a transcript graded against a
  :class:`~envs.judge.rubric.Rubric` by a :class:`~envs.judge.judge.Judge` (one call, or one per criterion).
- :class:`SimulatedUser`: a guarded ``MessageCompleter`` playing the user (persona as system
  prompt, roles swapped); it may end the chat early with its end marker.
- :class:`RubricEnv`: a :class:`~envs.core.ChatEnv`; after the last turn the judge grades the
  transcript against the rubric; reward = normalised score (or the judge's fallback).
- :class:`PairwiseEnv`: the same chat, no per-episode reward; :class:`~envs.judge.builders.PairwiseGroupBuilder`
  compares the group's transcripts in a concurrent tournament (reward = win rate).
- The group and dataset builders: :mod:`envs.judge.builders`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.rl.types import Metrics

from envs.core import ChatEnv, EnvLimits, Fault, FaultPolicy, Reply
from envs.judge.config import (
    JudgeConfig,
    OnTruncation,
)
from envs.judge.judge import Judge, JudgeResult, JudgeStatus, sum_metrics
from envs.judge.rubric import Criterion, GradingMode, Rubric
from envs.judge.tasks import JudgeTask

DEFAULT_FAULTS: Mapping[Fault, FaultPolicy] = {Fault.TRUNCATED: FaultPolicy(reward=0.0, end_episode=False)}
"""A truncated answer ends the chat and is judged as it is (the judge sees it was cut); other
faults end the episode unjudged (reward 0; in a pairwise group the episode forfeits)."""


# --------------------------------------------------------------------------------------------
# Simulated user
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UserConfig:
    """A picklable simulated user: the completer playing it and its default persona."""

    model: JudgeConfig
    """The guarded completer playing the user (its cache is not used: users should vary)."""
    persona: str = "You are a curious user who asks short follow-up questions."
    """Persona for tasks that do not give one."""
    end_marker: str = "<END>"
    """When the user's reply contains it, the chat ends and is judged."""


_USER_INSTRUCTIONS = (
    "You are role-playing the user in a chat with an AI assistant. Stay in character. "
    "Write only your next message to the assistant, in one or two sentences. "
    "If your request has been fully handled, write {end} instead."
)


class SimulatedUser:
    """Plays the user of a multi-turn chat through a guarded completer (deadline, retries).

    The completer sees the persona as its system prompt and the chat with roles swapped (the
    policy's replies as ``user`` messages, earlier user messages as its own ``assistant`` turns).
    """

    def __init__(self, model: Judge, persona: str, end_marker: str = "<END>"):
        self.model = model
        self.persona = persona
        self.end_marker = end_marker

    def prompt(self, conversation: Sequence[Message]) -> list[Message]:
        """The simulated user's view of ``conversation`` (which ends with an assistant turn)."""
        system = f"{self.persona}\n\n{_USER_INSTRUCTIONS.format(end=self.end_marker)}"
        swapped: list[Message] = [{"role": "system", "content": system}]
        for m in conversation:
            if m["role"] == "user":
                swapped.append({"role": "assistant", "content": m["content"]})
            elif m["role"] == "assistant":
                swapped.append({"role": "user", "content": m["content"]})
        return swapped

    async def reply(self, conversation: Sequence[Message]) -> tuple[str | None, JudgeResult]:
        """The user's next message, or None when the user ends the chat (or could not answer)."""
        result = await self.model.ask(self.prompt(conversation), _non_empty, use_cache=False)
        if not result.ok:
            return None, result
        text = result.reply.strip()
        if self.end_marker and self.end_marker in text:
            return None, result
        return text, result


def _non_empty(text: str) -> float | None:
    return 1.0 if text.strip() else None


# --------------------------------------------------------------------------------------------
# Rubric grading
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RubricGrade:
    """The outcome of grading one transcript against a rubric."""

    score: float
    """Normalised score in ``[0, 1]``, or the judge's fallback value when ``ok`` is False."""
    ok: bool
    """False when any judge call fell back (the score is then the fallback value)."""
    results: tuple[JudgeResult, ...]
    """One judge call (holistic) or one per criterion."""

    @property
    def metrics(self) -> dict[str, float]:
        """Summed judge counters plus ``judge/score`` (only when ``ok``)."""
        metrics = sum_metrics(self.results)
        if self.ok:
            metrics["judge/score"] = self.score
        return metrics


async def grade(judge: Judge, rubric: Rubric, transcript: Sequence[Message]) -> RubricGrade:
    """Grade ``transcript`` against ``rubric`` with ``judge`` (never raises for judge faults)."""
    if rubric.mode is GradingMode.HOLISTIC or len(rubric.criteria) == 1:
        result = await judge.ask(rubric.prompt(transcript), rubric.parse, namespace=rubric.namespace())
        return RubricGrade(score=result.value, ok=result.ok, results=(result,))
    results: list[JudgeResult | None] = [None] * len(rubric.criteria)

    async def one(index: int, criterion: Criterion) -> None:
        results[index] = await judge.ask(
            rubric.prompt(transcript, criterion),
            lambda text: rubric.parse(text, criterion),
            namespace=rubric.namespace(criterion),
        )

    async with anyio.create_task_group() as tg:
        for index, criterion in enumerate(rubric.criteria):
            tg.start_soon(one, index, criterion)
    done = tuple(r for r in results if r is not None)
    if any(r.status is JudgeStatus.FALLBACK for r in done):
        return RubricGrade(score=judge.config.fallback_reward, ok=False, results=done)
    score = sum(c.weight * r.value for c, r in zip(rubric.criteria, done, strict=True)) / rubric.total_weight
    return RubricGrade(score=score, ok=True, results=done)


# --------------------------------------------------------------------------------------------
# Envs
# --------------------------------------------------------------------------------------------
class JudgedChatEnv(ChatEnv):
    """A chat of ``task.turns`` assistant turns (a simulated user answers in between), then :meth:`finish`.

    Args:
        renderer: the policy's renderer.
        task: the prompt, and the number of turns.
        user: plays the user between turns (required when ``task.turns > 1``).
        limits: budgets (``max_turns`` defaults to, and must be at least, ``task.turns``).
        faults: fault policies (default :data:`DEFAULT_FAULTS`).
        on_truncation: end and judge the chat on a truncated turn, or continue it.
    """

    def __init__(
        self,
        renderer: Renderer,
        task: JudgeTask,
        *,
        user: SimulatedUser | None = None,
        limits: EnvLimits | None = None,
        faults: Mapping[Fault, FaultPolicy] | None = None,
        on_truncation: OnTruncation = OnTruncation.JUDGE,
    ):
        limits = limits or EnvLimits(max_turns=task.turns)
        if limits.max_turns < task.turns:
            raise ValueError(
                f"limits.max_turns={limits.max_turns} is below task {task.id!r}'s {task.turns} turns"
            )
        if task.turns > 1 and user is None:
            raise ValueError(f"task {task.id!r} has {task.turns} turns and needs a simulated user")
        super().__init__(renderer, limits=limits, faults=dict(DEFAULT_FAULTS if faults is None else faults))
        self.task = task
        self.user = user
        self.on_truncation = OnTruncation(on_truncation)
        self.final_transcript: list[Message] | None = None
        """The whole chat once the episode finished normally (None after an ending fault)."""

    def initial_messages(self) -> list[Message]:
        return [dict(m) for m in self.task.messages]  # type: ignore[misc]

    @property
    def response_messages(self) -> list[Message] | None:
        """What the policy's episode added after the prompt (None if it ended on a fault)."""
        if self.final_transcript is None:
            return None
        return self.final_transcript[len(self.task.messages) :]

    async def on_message(self, message: Message) -> Reply:
        transcript = [*self.messages, message]
        metrics: Metrics = {}
        if self.turn < self.task.turns and self.user is not None:
            text, result = await self.user.reply(transcript)
            metrics.update(result.metrics("user/"))
            if text is not None:
                return Reply(messages=[{"role": "user", "content": text}], metrics=metrics)
            metrics["user/ended_early"] = 1.0
        self.final_transcript = transcript
        reply = await self.finish(transcript)
        return Reply(
            messages=reply.messages,
            reward=reply.reward,
            done=True,
            metrics={**metrics, **reply.metrics},
            logs=reply.logs,
            stop_reason=reply.stop_reason,
        )

    async def on_fault(self, fault: Fault, message: Message | None) -> Reply:
        """A fault whose policy keeps the episode going (default: truncation): the chat ends here
        and is judged as it is (continuing would re-render the cut turn and break the extension),
        unless ``on_truncation`` is ``CONTINUE``."""
        if message is None or (fault is Fault.TRUNCATED and self.on_truncation is OnTruncation.CONTINUE):
            return await super().on_fault(fault, message)
        transcript = [*self.messages, message]
        self.final_transcript = transcript
        reply = await self.finish(transcript)
        return Reply(reply.messages, reply.reward, True, reply.metrics, reply.logs, reply.stop_reason)

    async def finish(self, transcript: list[Message]) -> Reply:
        """Called once with the whole chat after the last assistant turn; returns the final reply."""
        return Reply(done=True)


class RubricEnv(JudgedChatEnv):
    """A judged chat whose final reward is the rubric score given by the judge (normalised to [0, 1]).

    Args:
        renderer, task, user, limits, faults, on_truncation: see :class:`JudgedChatEnv`.
        rubric: the rubric the judge grades against.
        judge: the guarded judge.
    """

    def __init__(
        self,
        renderer: Renderer,
        task: JudgeTask,
        rubric: Rubric,
        judge: Judge,
        *,
        user: SimulatedUser | None = None,
        limits: EnvLimits | None = None,
        faults: Mapping[Fault, FaultPolicy] | None = None,
        on_truncation: OnTruncation = OnTruncation.JUDGE,
    ):
        super().__init__(renderer, task, user=user, limits=limits, faults=faults, on_truncation=on_truncation)
        self.rubric = rubric
        self.judge = judge

    async def finish(self, transcript: list[Message]) -> Reply:
        result = await grade(self.judge, self.rubric, transcript)
        last = result.results[-1] if result.results else None
        logs: dict[str, str | int | float] = {"judge_status": str(last.status) if last else ""}
        if last is not None:
            logs["judge_reply"] = last.reply[:500]
            if last.error:
                logs["judge_error"] = last.error
        return Reply(done=True, reward=result.score, metrics=result.metrics, logs=logs)


class PairwiseEnv(JudgedChatEnv):
    """A judged chat with no reward of its own: :class:`PairwiseGroupBuilder` compares the group."""
