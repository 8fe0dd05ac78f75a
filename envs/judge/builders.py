"""Judge env builders: the picklable group builders (rubric-graded and pairwise) and the chz
dataset builder of ``python -m envs.judge.train``.

- :class:`RubricGroupBuilder`, :class:`PairwiseGroupBuilder`: picklable builders storing judge
  *configs* and renderer *names*; live judges come from :func:`~envs.judge.judge.get_judge`.
  :class:`PairwiseGroupBuilder` compares the group's transcripts in a concurrent tournament
  (reward = win rate).
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

import chz
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.rl.types import EnvGroupBuilder, Metrics, RLDatasetBuilder, Trajectory

from backend.model import SMOLLM2
from envs.core import EnvLimits, Fault, FaultPolicy
from envs.datasets import GroupDataset
from envs.judge.config import (
    SMALL_LOCAL_JUDGE,
    JudgeConfig,
    JudgeEnvConfig,
    JudgeEnvKind,
    OnTruncation,
    PairingScheme,
)
from envs.judge.env import JudgedChatEnv, PairwiseEnv, RubricEnv, SimulatedUser, UserConfig
from envs.judge.judge import get_judge
from envs.judge.pairwise import run_tournament, tournament_pairs
from envs.judge.rubric import Rubric, load_rubrics
from envs.judge.tasks import JudgeTask, check_files, load_tasks


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
