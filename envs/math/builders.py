"""Cookbook builders for the math env: group builder, ``RLDataset`` and chz ``RLDatasetBuilder``.

Everything here pickles: builders store the renderer *name* and model name and create the
renderer in :meth:`MathGroupBuilder.make_envs`; the grader is the process-wide default of the
process that runs the envs. They run unchanged in ``tinker_cookbook.rl.train``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import chz
from tinker_cookbook.completers import TokenCompleter
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, Metrics, RLDataset, RLDatasetBuilder, Trajectory

from backend.model import SMOLLM2
from envs.datasets import GroupDataset
from envs.math._keys import check_data_keys
from envs.math.config import MathEnvConfig
from envs.math.data import MathProblem, Split, load_split
from envs.math.env import MathEnv
from renderers_ext import load_renderer

__all__ = ["MathDatasetBuilder", "MathGroupBuilder", "MathRLDataset", "ProblemsDatasetBuilder"]


@dataclass(frozen=True)
class MathGroupBuilder(EnvGroupBuilder):
    """``group_size`` envs on the same problem (GRPO-style group)."""

    problem: MathProblem
    """The problem every env of the group gets (the first of a series)."""
    env: MathEnvConfig
    """The game."""
    group_size: int
    """Envs in the group."""
    model_name_for_tokenizer: str = SMOLLM2
    """Model whose tokenizer the renderer uses."""
    renderer_name: str | None = None
    """Renderer name (see ``renderers_ext.load_renderer``; None: the model's recommended one)."""
    dataset_name: str = "math"
    """Logging tag."""
    follow_ups: tuple[MathProblem, ...] = ()
    """The problems asked after :attr:`problem` in a series (``env.problems_per_episode``)."""

    async def make_envs(self) -> Sequence[Env]:
        renderer = load_renderer(
            self.env.renderer_name_for(self.renderer_name), self.model_name_for_tokenizer
        )
        return [
            MathEnv(renderer, self.problem, self.env, follow_ups=self.follow_ups)
            for _ in range(self.group_size)
        ]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        return [(0.0, {}) for _ in trajectory_group]

    def logging_tags(self) -> list[str]:
        return [self.dataset_name, f"level{self.problem.level}"]


class MathRLDataset(GroupDataset):
    """Batches of :class:`MathGroupBuilder` (a :class:`~envs.datasets.GroupDataset`: group ``k`` is
    problem ``k`` of the seeded order, so batch ``i`` is a pure function of ``(problems, seed, i)``;
    in a series of ``n`` problems per episode, group ``k`` asks problems ``k * n ... k * n + n - 1``
    of that order, so no two episodes share a problem).

    Args:
        problems: the problems (order is shuffled once with ``seed`` when ``shuffle``).
        batch_size: groups per batch.
        group_size: envs per group.
        env: the game.
        model_name_for_tokenizer / renderer_name: how envs build their renderer.
        seed: shuffle seed.
        shuffle: shuffle the problem order (train) or keep it (test).
        dataset_name: logging tag.
    """

    def __init__(
        self,
        problems: Sequence[MathProblem],
        *,
        batch_size: int,
        group_size: int,
        env: MathEnvConfig,
        model_name_for_tokenizer: str = SMOLLM2,
        renderer_name: str | None = None,
        seed: int = 0,
        shuffle: bool = True,
        dataset_name: str = "math",
    ):
        if batch_size < 1 or group_size < 1:
            raise ValueError(f"batch_size and group_size must be >= 1, got {batch_size}, {group_size}")
        if not problems:
            raise ValueError("a MathRLDataset needs at least one problem")
        order = list(range(len(problems)))
        if shuffle:
            random.Random(f"turngym-math-order:{seed}").shuffle(order)
        self.problems = tuple(problems[i] for i in order)
        self.series_length = min(env.problems_per_episode, len(self.problems))
        """Problems per episode (the config's, at most the dataset's)."""
        super().__init__(batch_size, len(self.problems) // self.series_length)
        self.group_size = group_size
        self.env = env
        self.model_name_for_tokenizer = model_name_for_tokenizer
        self.renderer_name = renderer_name
        self.dataset_name = dataset_name

    def series(self, index: int) -> tuple[MathProblem, ...]:
        """The problems of group ``index``: ``series_length`` consecutive problems of the order
        (wrapping around the end)."""
        n = self.series_length
        return tuple(self.problems[(index * n + k) % len(self.problems)] for k in range(n))

    def group(self, index: int) -> MathGroupBuilder:
        """The group of problem ``index`` (in the dataset's order)."""
        first, *follow_ups = self.series(index)
        return MathGroupBuilder(
            first,
            self.env,
            self.group_size,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
            dataset_name=self.dataset_name,
            follow_ups=tuple(follow_ups),
        )


@chz.chz
class ProblemsDatasetBuilder(RLDatasetBuilder):
    """The data keys and splits of an env that serves math problems (the math env, the code env);
    a subclass adds its game as ``env`` and says how a split becomes a dataset (:meth:`dataset`)."""

    batch_size: int = 4
    """Groups per training batch."""
    group_size: int = 4
    """Envs per group (test groups have 1)."""
    source: str = "generated"
    """``generated`` (offline default), ``gsm8k``, ``math`` or ``jsonl``."""
    path: str | None = None
    """Local data file; ``{split}`` is replaced by ``train`` / ``test``."""
    test_path: str | None = None
    """Local test file when it does not follow ``path``'s ``{split}`` pattern."""
    levels: str = "1,2,3,4,5"
    """Generator difficulty levels (comma separated)."""
    n_train: int = 2000
    """Training problems (at most)."""
    n_test: int = 64
    """Test problems (at most; 0: no test set)."""
    model_name_for_tokenizer: str = SMOLLM2
    """Model whose tokenizer the renderer uses."""
    renderer_name: str | None = None
    """Renderer name (None: the model's recommended one)."""
    seed: int = 0
    """Generator and shuffle seed."""

    @chz.validate
    def _check(self) -> None:
        check_data_keys(self.source, self.levels)

    def dataset(self, problems: Sequence[MathProblem], **kwargs: Any) -> MathRLDataset:
        """The dataset of one split's ``problems`` (``kwargs``: the split's
        :class:`MathRLDataset` arguments: ``batch_size``, ``group_size``, ``shuffle``...)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how problems become a dataset")

    def datasets(self) -> tuple[MathRLDataset, MathRLDataset | None]:
        """Build both splits synchronously."""
        common: dict[str, Any] = dict(
            model_name_for_tokenizer=self.model_name_for_tokenizer, renderer_name=self.renderer_name
        )
        train_problems = load_split(
            self.source, Split.TRAIN, path=self.path, n=self.n_train, seed=self.seed, levels=self.levels
        )
        train = self.dataset(
            train_problems,
            batch_size=self.batch_size,
            group_size=self.group_size,
            seed=self.seed,
            dataset_name=self.source,
            **common,
        )
        if self.n_test <= 0:
            return train, None
        test_problems = load_split(
            self.source,
            Split.TEST,
            path=self.test_path or self.path,
            n=self.n_test,
            seed=self.seed,
            levels=self.levels,
        )
        test = self.dataset(
            test_problems,
            batch_size=max(1, min(len(test_problems), 32)),
            group_size=1,
            shuffle=False,
            dataset_name=f"{self.source}_test",
            **common,
        )
        return train, test

    async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
        return self.datasets()


@chz.chz
class MathDatasetBuilder(ProblemsDatasetBuilder):
    """Train and test datasets of math problems (chz: every field is a key, the game nested as ``env``)."""

    env: MathEnvConfig = chz.field(default_factory=MathEnvConfig)
    """The game (``MathEnvConfig.preset("feedback")``, ``env.calculator=auto``...)."""

    def dataset(self, problems: Sequence[MathProblem], **kwargs: Any) -> MathRLDataset:
        """A :class:`MathRLDataset` of ``problems`` with this game."""
        return MathRLDataset(problems, env=self.env, **kwargs)

    async def scripted_episodes(self, n: int, seed: int) -> list[tuple[Env, TokenCompleter]]:
        """``n`` episodes played by a scripted solver, for a supervised warm start
        (``training.SupportsScriptedEpisodes``, the ``warm_start.*`` keys of the train CLI).

        Problems of the training split in an order drawn with ``seed`` (never the held-out
        split), each series as the RL episodes have it, played by :class:`~envs.math.ThinkingSolver`:
        always right at the first attempt, thinking before the answer when ``env.thinking``.
        """
        from envs.math.thinking import ThinkingSolver
        from envs.player import PlayerPolicy

        problems = load_split(
            self.source, Split.TRAIN, path=self.path, n=self.n_train, seed=self.seed, levels=self.levels
        )
        pool = MathRLDataset(problems, batch_size=1, group_size=1, env=self.env, seed=seed)
        renderer = load_renderer(self.env.renderer_name_for(self.renderer_name), self.model_name_for_tokenizer)
        episodes: list[tuple[Env, TokenCompleter]] = []
        for i in range(n):
            first, *follow_ups = series = pool.series(i)
            env = MathEnv(renderer, first, self.env, follow_ups=follow_ups)
            episodes.append((env, PlayerPolicy(env, ThinkingSolver(series, thinking=self.env.thinking))))
        return episodes
