"""Judge-based environments: rubric-graded and pairwise-preference chats, single- or multi-turn.

- :func:`grade` and :class:`RubricGrade`: a transcript graded against a
  :class:`~envs.judge.rubric.Rubric` by a :class:`~envs.judge.judge.Judge` (one call, or one per criterion).
- :class:`SimulatedUser`: a guarded ``MessageCompleter`` playing the user (persona as system
  prompt, roles swapped); it may end the chat early with its end marker.
- :class:`RubricEnv`: a :class:`~envs.core.ChatEnv`; after the last turn the judge grades the
  transcript against the rubric; reward = normalised score (or the judge's fallback).
- :class:`PairwiseEnv`: the same chat, no per-episode reward; :class:`PairwiseGroupBuilder`
  compares the group's transcripts in a concurrent tournament (reward = win rate).
- :class:`RubricGroupBuilder`, :class:`PairwiseGroupBuilder`: picklable builders storing judge
  *configs* and renderer *names*; live judges come from :func:`~envs.judge.judge.get_judge`.
- :class:`JudgeDatasetBuilder`: a chz ``RLDatasetBuilder`` over a JSONL task file and a rubric file
  (:class:`~envs.judge.tasks.JudgeTask` s, ``tasks.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import chz
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.rl.types import EnvGroupBuilder, Metrics, RLDatasetBuilder, Trajectory

from backend.model import SMOLLM2
from envs.core import ChatEnv, EnvLimits, Fault, FaultPolicy, Reply
from envs.datasets import GroupDataset
from envs.judge.config import (
    SMALL_LOCAL_JUDGE,
    JudgeConfig,
    JudgeEnvConfig,
    JudgeEnvKind,
    OnTruncation,
    PairingScheme,
)
from envs.judge.judge import Judge, JudgeResult, JudgeStatus, get_judge, sum_metrics
from envs.judge.pairwise import run_tournament, tournament_pairs
from envs.judge.rubric import Criterion, GradingMode, Rubric, load_rubrics
from envs.judge.tasks import JudgeTask, check_files, load_tasks

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


# --------------------------------------------------------------------------------------------
# Group builders
# --------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=16)
def _renderer(name: str | None, model_name: str) -> Renderer:
    from renderers_ext import load_renderer

    return load_renderer(name, model_name)


def _simulated_user(config: UserConfig | None, task: JudgeTask) -> SimulatedUser | None:
    if task.turns <= 1:
        return None
    if config is None:
        raise ValueError(f"task {task.id!r} has {task.turns} turns but the builder has no simulated user")
    return SimulatedUser(get_judge(config.model), task.persona or config.persona, config.end_marker)


@dataclass(frozen=True)
class RubricGroupBuilder(EnvGroupBuilder):
    """``group_size`` :class:`RubricEnv` s on one task (picklable: configs and names only)."""

    task: JudgeTask
    rubric: Rubric
    judge: JudgeConfig
    group_size: int
    model_name_for_tokenizer: str = SMOLLM2
    renderer_name: str | None = None
    user: UserConfig | None = None
    limits: EnvLimits | None = None
    faults: Mapping[Fault, FaultPolicy] | None = None
    on_truncation: OnTruncation = OnTruncation.JUDGE

    async def make_envs(self) -> Sequence[RubricEnv]:
        renderer = _renderer(self.renderer_name, self.model_name_for_tokenizer)
        judge = get_judge(self.judge)
        return [
            RubricEnv(
                renderer,
                self.task,
                self.rubric,
                judge,
                user=_simulated_user(self.user, self.task),
                limits=self.limits,
                faults=self.faults,
                on_truncation=self.on_truncation,
            )
            for _ in range(self.group_size)
        ]

    def logging_tags(self) -> list[str]:
        return ["judge", "rubric"]


def rubric_criteria_text(rubric: Rubric | None) -> str:
    """A rubric as one line of criteria for a pairwise comparison prompt."""
    if rubric is None:
        return ""
    return "; ".join(f"{c.name} (weight {c.weight:g}): {c.description}" for c in rubric.criteria)


@dataclass(frozen=True)
class PairwiseGroupBuilder(EnvGroupBuilder):
    """``group_size`` :class:`PairwiseEnv` s on one task; group reward = win rate in a judged tournament.

    The comparisons run concurrently (``concurrent=False`` runs them one after another, for baselines).
    """

    task: JudgeTask
    judge: JudgeConfig
    group_size: int
    pattern: PairingScheme = PairingScheme.BOTH_ORDERS
    rounds: int = 1
    rubric: Rubric | None = None
    model_name_for_tokenizer: str = SMOLLM2
    renderer_name: str | None = None
    user: UserConfig | None = None
    limits: EnvLimits | None = None
    faults: Mapping[Fault, FaultPolicy] | None = None
    on_truncation: OnTruncation = OnTruncation.JUDGE
    concurrent: bool = True

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ValueError(f"a pairwise group needs group_size >= 2, got {self.group_size}")
        tournament_pairs(self.group_size, self.pattern, self.rounds)  # validates pattern and rounds

    async def make_envs(self) -> Sequence[PairwiseEnv]:
        renderer = _renderer(self.renderer_name, self.model_name_for_tokenizer)
        return [
            PairwiseEnv(
                renderer,
                self.task,
                user=_simulated_user(self.user, self.task),
                limits=self.limits,
                faults=self.faults,
                on_truncation=self.on_truncation,
            )
            for _ in range(self.group_size)
        ]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Any]
    ) -> list[tuple[float, Metrics]]:
        if len(env_group) != len(trajectory_group):
            raise ValueError(f"{len(env_group)} envs for {len(trajectory_group)} trajectories")
        responses: list[list[Message]] = []
        forfeits: list[bool] = []
        for env in env_group:
            if not isinstance(env, JudgedChatEnv):
                raise TypeError(f"PairwiseGroupBuilder needs its own envs, got {type(env).__name__}")
            response = env.response_messages
            responses.append(response or [])
            forfeits.append(response is None)
        result = await run_tournament(
            get_judge(self.judge),
            list(self.task.messages),
            responses,
            pattern=self.pattern,
            rounds=self.rounds,
            forfeits=forfeits,
            criteria=rubric_criteria_text(self.rubric),
            reference=self.task.reference,
            concurrent=self.concurrent,
        )
        group_metrics = result.metrics()
        return [(reward, {**group_metrics, "pairwise/win_rate": reward}) for reward in result.rewards]

    def logging_tags(self) -> list[str]:
        return ["judge", "pairwise"]


# --------------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------------
class JudgeDataset(GroupDataset):
    """Fixed list of group builders served in batches (the last batch may be short)."""

    def __init__(self, builders: Sequence[EnvGroupBuilder], batch_size: int):
        self.builders = list(builders)
        super().__init__(batch_size, len(self.builders))

    def group(self, index: int) -> EnvGroupBuilder:
        """Builder ``index`` of the list."""
        return self.builders[index]


@chz.chz
class JudgeDatasetBuilder(RLDatasetBuilder):
    """Judge env datasets: the game (:class:`JudgeEnvConfig`: tasks, rubrics, reward kind, turns),
    the judge, and the batch shape.

    Tasks are shuffled with ``seed``; the last ``n_test`` form the held-out split. The train split
    repeats for ``epochs`` passes (reshuffled each pass).
    """

    env: JudgeEnvConfig = chz.field(default_factory=JudgeEnvConfig)
    """The game (``env.kind=pairwise``, ``env.multi_turn=true``...)."""
    judge: JudgeConfig = chz.field(default_factory=SMALL_LOCAL_JUDGE, blueprint_unspecified=SMALL_LOCAL_JUDGE)
    """Who grades (default :data:`~envs.judge.config.SMALL_LOCAL_JUDGE`); its ``reply_prefix``
    None becomes the verdict's prefix."""
    batch_size: int = 4
    """Tasks (groups) per training batch."""
    group_size: int = 4
    """Answers per task."""
    test_group_size: int = 2
    """Answers per held-out task (at least 2 when pairwise)."""
    n_test: int = 0
    """Tasks held out for evaluation."""
    epochs: int = 1
    """Passes over the training tasks."""
    model_name_for_tokenizer: str = SMOLLM2
    """The policy's model, for its tokenizer."""
    renderer_name: str | None = None
    """The policy's renderer (None: the model's recommended one)."""
    seed: int = 0
    """Task shuffle seed."""

    def tasks(self) -> list[JudgeTask]:
        """The tasks (multi-turn ones collapsed to one turn unless ``env.multi_turn``)."""
        tasks = load_tasks(self.env.tasks_file)
        if not self.env.multi_turn:
            tasks = [dataclasses.replace(t, persona=None, turns=1) for t in tasks]
        return tasks

    def check_files(self) -> None:
        """Load the task and rubric files and check every task's rubric exists (a ``ValueError``
        naming the file and line, or the task, on the first problem; see :func:`~envs.judge.tasks.check_files`)."""
        check_files(self.env.tasks_file, self.env.rubrics_file)

    def _user(self) -> UserConfig:
        return UserConfig(model=self.env.user_for(self.judge))

    def make_group(self, task: JudgeTask, rubrics: Mapping[str, Rubric], group_size: int) -> EnvGroupBuilder:
        """The group builder of one task."""
        if task.rubric not in rubrics:
            raise ValueError(
                f"task {task.id!r} names rubric {task.rubric!r}; known: {', '.join(sorted(rubrics))}"
            )
        user = self._user() if task.turns > 1 else None
        judge = self.env.judge_for(self.judge)
        if JudgeEnvKind(self.env.kind) is JudgeEnvKind.PAIRWISE:
            return PairwiseGroupBuilder(
                task=task,
                judge=judge,
                group_size=group_size,
                pattern=PairingScheme(self.env.pattern),
                rounds=self.env.rounds,
                rubric=rubrics[task.rubric],
                model_name_for_tokenizer=self.model_name_for_tokenizer,
                renderer_name=self.renderer_name,
                user=user,
                on_truncation=OnTruncation(self.env.on_truncation),
            )
        return RubricGroupBuilder(
            task=task,
            rubric=rubrics[task.rubric],
            judge=judge,
            group_size=group_size,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
            user=user,
            on_truncation=OnTruncation(self.env.on_truncation),
        )

    async def __call__(self) -> tuple[JudgeDataset, JudgeDataset | None]:
        if self.batch_size < 1 or self.group_size < 1 or self.epochs < 1:
            raise ValueError(
                f"batch_size, group_size and epochs must be >= 1, got {self.batch_size}, {self.group_size}, {self.epochs}"
            )
        rubrics = load_rubrics(self.env.rubrics_file)
        tasks = self.tasks()
        random.Random(self.seed).shuffle(tasks)
        if not 0 <= self.n_test < len(tasks):
            raise ValueError(
                f"n_test must be in [0, {len(tasks) - 1}] for {len(tasks)} tasks, got {self.n_test}"
            )
        train_tasks, test_tasks = tasks[: len(tasks) - self.n_test], tasks[len(tasks) - self.n_test :]
        order: list[JudgeTask] = []
        rng = random.Random(self.seed + 1)
        for _ in range(self.epochs):
            epoch = list(train_tasks)
            rng.shuffle(epoch)
            order.extend(epoch)
        train = JudgeDataset([self.make_group(t, rubrics, self.group_size) for t in order], self.batch_size)
        if not test_tasks:
            return train, None
        test_size = (
            max(self.test_group_size, 2)
            if JudgeEnvKind(self.env.kind) is JudgeEnvKind.PAIRWISE
            else self.test_group_size
        )
        test = JudgeDataset([self.make_group(t, rubrics, test_size) for t in test_tasks], len(test_tasks))
        return train, test
