"""Twenty Questions builders: a group of games on one word, the datasets of the train and held-out
splits, and the chz dataset builder of ``python -m envs.twenty_questions.train`` (which also scripts
the episodes of a warm start).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, get_args

import chz
from tinker_cookbook.completers import TokenCompleter
from tinker_cookbook.rl.types import (
    Env,
    EnvGroupBuilder,
    Metrics,
    RLDatasetBuilder,
    Trajectory,
)

from backend.model import SMOLLM2, BackendName
from envs.datasets import GroupDataset
from envs.twenty_questions.answerers import Answerer, KBAnswerer, LLMAnswerer
from envs.twenty_questions.config import TwentyQuestionsConfig
from envs.twenty_questions.env import TwentyQuestionsEnv
from envs.twenty_questions.words import pick_candidates, split_words
from renderers_ext import load_renderer, recommended_renderer_name


@dataclass(frozen=True)
class TwentyQuestionsGroupBuilder(EnvGroupBuilder):
    """A group of ``group_size`` games on the same secret word and candidate list (picklable)."""

    word: str
    """The secret word."""
    group_size: int
    """Games in the group (the GRPO group size)."""
    answerer: Answerer
    """Who answers (must pickle: :class:`KBAnswerer` does)."""
    env: TwentyQuestionsConfig = field(default_factory=TwentyQuestionsConfig)
    """Rules, rewards, difficulty."""
    candidates: tuple[str, ...] = ()
    """The candidate list told to the player (empty: none)."""
    model_name_for_tokenizer: str = SMOLLM2
    """The player's model, for its tokenizer."""
    renderer_name: str | None = None
    """The player's renderer, by name (None: the model's recommended one); renderers are created
    in :meth:`make_envs`."""
    split: str = "train"
    """Word split, used as a logging tag."""

    async def make_envs(self) -> Sequence[Env]:
        renderer = load_renderer(self.renderer_name, self.model_name_for_tokenizer)
        return [
            TwentyQuestionsEnv(renderer, self.word, self.answerer, self.env, self.candidates)
            for _ in range(self.group_size)
        ]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        """No group reward; reports each episode's :class:`Metric` values."""
        return [
            (0.0, env.episode_metrics() if isinstance(env, TwentyQuestionsEnv) else {}) for env in env_group
        ]

    def logging_tags(self) -> list[str]:
        return ["twenty_questions", f"twenty_questions_{self.split}"]


class TwentyQuestionsDataset(GroupDataset):
    """Batches of :class:`TwentyQuestionsGroupBuilder`, seeded (a :class:`~envs.datasets.GroupDataset`:
    group ``k`` is :meth:`item` ``k``).

    Words are visited epoch by epoch, each epoch in a seeded order (or in the given order when
    ``shuffle`` is False); candidate lists are drawn from ``candidate_pool`` with a seed that
    depends on the seed and the item's position, so resuming at batch i reproduces it exactly.
    """

    def __init__(
        self,
        words: Sequence[str],
        *,
        batch_size: int,
        group_size: int,
        answerer: Answerer,
        env: TwentyQuestionsConfig | None = None,
        model_name_for_tokenizer: str = SMOLLM2,
        renderer_name: str | None = None,
        seed: int = 0,
        num_batches: int | None = None,
        shuffle: bool = True,
        candidate_pool: Sequence[str] | None = None,
        split: str = "train",
    ):
        if not words:
            raise ValueError("a Twenty Questions dataset needs at least one word")
        if batch_size < 1 or group_size < 1:
            raise ValueError(f"batch_size and group_size must be >= 1, got {batch_size} and {group_size}")
        self.words = tuple(words)
        self.group_size = group_size
        self.answerer = answerer
        self.env = env or TwentyQuestionsConfig()
        self.model_name_for_tokenizer = model_name_for_tokenizer
        self.renderer_name = renderer_name
        self.seed = seed
        self.shuffle = shuffle
        self.candidate_pool = tuple(candidate_pool) if candidate_pool is not None else self.words
        self.split = split
        if self.env.candidates > len(set(self.candidate_pool)):
            raise ValueError(
                f"candidates={self.env.candidates} exceeds the {len(set(self.candidate_pool))} words of the candidate pool"
            )
        self._orders: dict[int, tuple[str, ...]] = {}
        self.num_batches = num_batches if num_batches is not None else max(1, len(self.words) // batch_size)
        if self.num_batches < 1:
            raise ValueError(f"num_batches must be >= 1, got {self.num_batches}")
        super().__init__(batch_size, self.num_batches * batch_size)

    def _epoch_order(self, epoch: int) -> tuple[str, ...]:
        if epoch not in self._orders:
            order = list(self.words)
            if self.shuffle:
                random.Random(f"twenty_questions/{self.seed}/epoch/{epoch}").shuffle(order)
            if len(self._orders) >= 4:
                self._orders.clear()
            self._orders[epoch] = tuple(order)
        return self._orders[epoch]

    def item(self, flat_index: int) -> tuple[str, tuple[str, ...]]:
        """The secret word and candidate list of the ``flat_index``-th group of the dataset."""
        epoch, position = divmod(flat_index, len(self.words))
        word = self._epoch_order(epoch)[position]
        candidates = pick_candidates(
            word, self.env.candidates, self.candidate_pool, seed=f"{self.seed}/{flat_index}"
        )
        return word, candidates

    def group(self, index: int) -> TwentyQuestionsGroupBuilder:
        """The group of :meth:`item` ``index``."""
        word, candidates = self.item(index)
        return TwentyQuestionsGroupBuilder(
            word=word,
            group_size=self.group_size,
            answerer=self.answerer,
            env=self.env,
            candidates=candidates,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
            split=self.split,
        )


DEFAULT_LLM_ANSWERER = "Qwen/Qwen3.5-9B"
"""The LLM answerer's model on Tinker when none is given (the cookbook recipe's)."""


def answerer_renderer_name(model_name: str) -> str:
    """A non-thinking renderer for an LLM answerer (a few tokens must suffice for yes / no)."""
    if model_name.startswith(("Qwen/Qwen3.5", "Qwen/Qwen3.6")):
        return "qwen3_5_disable_thinking"
    if model_name.startswith("Qwen/Qwen3"):
        return "qwen3_disable_thinking"
    return recommended_renderer_name(model_name)


class AnswererKind(StrEnum):
    """Which answerer a dataset builder creates."""

    KB = "kb"
    """:class:`KBAnswerer`: deterministic, from the knowledge base (default; local backend)."""
    LLM = "llm"
    """:class:`LLMAnswerer` over a sampling client (local or Tinker) of ``answerer_base_model``."""


@chz.chz
class TwentyQuestionsDatasetBuilder(RLDatasetBuilder):
    """Train (train split) and test (held-out split) datasets; runs in tinker-cookbook's ``rl.train``."""

    batch_size: int = 8
    """Groups (secret words) per batch."""
    group_size: int = 4
    """Games per group."""
    model_name_for_tokenizer: str = SMOLLM2
    """The player's model (for its tokenizer)."""
    renderer_name: str | None = None
    """The player's renderer (None: the model's recommended one)."""
    env: TwentyQuestionsConfig = chz.field(default_factory=TwentyQuestionsConfig)
    """Rules, rewards and difficulty."""
    seed: int = 0
    """Seed of the training split's word order and candidate lists."""
    test_seed: int = 0
    """Seed of the held-out split's word order and candidate lists, apart from :attr:`seed`, so
    that runs with any seed are evaluated on the same games."""
    num_epochs: int = 1
    """Passes over the training words (sets the number of training batches)."""
    num_batches: int | None = None
    """Training batches (overrides ``num_epochs`` when set)."""
    test_group_size: int = 4
    """Games per test word."""
    test_batch_size: int | None = None
    """Test words per test batch (None: all test words in one batch). Test words come in one
    fixed seeded order, so the first batch is a representative sample."""
    answerer: AnswererKind = AnswererKind.KB
    """Which answerer: ``kb`` (default) or ``llm``."""
    answerer_backend: BackendName = "auto"
    """Where the LLM answerer runs: ``local`` (embedded model), ``tinker``, or ``auto`` (Tinker
    when ``TINKER_API_KEY`` is set, else local); see ``backend.make_service_client``."""
    answerer_base_model: str | None = None
    """The LLM answerer's model (None: SmolLM2 locally, ``Qwen/Qwen3.5-9B`` on Tinker)."""
    answerer_renderer_name: str | None = None
    """The LLM answerer's renderer (None: a non-thinking one for the model)."""
    answerer_max_tokens: int = 5
    """Sampling budget of the LLM answerer."""
    answerer_temperature: float = 0.0
    """Sampling temperature of the LLM answerer (0: greedy)."""
    base_url: str | None = None
    """Tinker service URL for the LLM answerer."""
    scripted_split_noise: float = 0.0
    """Warm-start games (:meth:`scripted_episodes`): the halving player's ``split_noise``."""
    scripted_exact_questions: int = 0
    """Warm-start games: the halving player's ``exact_questions`` (its first questions, noise-free)."""

    @chz.validate
    def _check(self) -> None:
        if self.batch_size < 1 or self.group_size < 1 or self.test_group_size < 1:
            raise ValueError("batch_size, group_size and test_group_size must be >= 1")
        if self.num_epochs < 1:
            raise ValueError(f"num_epochs must be >= 1, got {self.num_epochs}")
        if self.answerer_backend not in get_args(BackendName):
            raise ValueError(
                f"answerer_backend must be one of {list(get_args(BackendName))}, got {self.answerer_backend!r}"
            )

    async def __call__(self) -> tuple[TwentyQuestionsDataset, TwentyQuestionsDataset]:
        return self.build()

    def build(
        self, answerer: Answerer | None = None
    ) -> tuple[TwentyQuestionsDataset, TwentyQuestionsDataset]:
        """The (train, test) datasets, with ``answerer`` or the one the fields describe."""
        answerer = answerer or self.make_answerer()
        train_words, test_words = split_words("train"), split_words("test")
        common = dict(
            answerer=answerer,
            env=self.env,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
        )
        train = TwentyQuestionsDataset(
            train_words,
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=self.num_batches or max(1, self.num_epochs * len(train_words) // self.batch_size),
            split="train",
            seed=self.seed,
            **common,  # type: ignore[arg-type]
        )
        test_batch = self.test_batch_size or len(test_words)
        test = TwentyQuestionsDataset(
            test_words,
            batch_size=test_batch,
            group_size=self.test_group_size,
            num_batches=max(1, len(test_words) // test_batch),
            split="test",  # one seeded order, so a first batch of a few words spans the kinds
            seed=self.test_seed,
            **common,  # type: ignore[arg-type]
        )
        return train, test

    async def scripted_episodes(self, n: int, seed: int) -> list[tuple[Env, TokenCompleter]]:
        """``n`` scripted games for a supervised warm start (``training.SupportsScriptedEpisodes``).

        Training words with candidate lists drawn with ``seed`` (apart from the RL batches), the
        KB answerer, and a scripted player: :class:`~envs.twenty_questions.HalvingPlayer`
        (binary search with set questions) when candidates are listed, else
        :class:`~envs.twenty_questions.KBOptimalPlayer`.
        """
        from envs.player import PlayerPolicy
        from envs.twenty_questions.players import HalvingPlayer, KBOptimalPlayer

        pool = TwentyQuestionsDataset(
            split_words("train"),
            batch_size=1,
            group_size=1,
            answerer=KBAnswerer(),
            env=self.env,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
            seed=seed,
        )
        renderer = load_renderer(self.renderer_name, self.model_name_for_tokenizer)
        episodes: list[tuple[Env, TokenCompleter]] = []
        for i in range(n):
            word, candidates = pool.item(i)
            env = TwentyQuestionsEnv(renderer, word, KBAnswerer(), self.env, candidates)
            player = (
                HalvingPlayer(
                    candidates,
                    max_questions=self.env.max_questions,
                    split_noise=self.scripted_split_noise,
                    exact_questions=self.scripted_exact_questions,
                    seed=seed * 100_003 + i,
                )
                if candidates
                else KBOptimalPlayer(max_questions=self.env.max_questions)
            )
            episodes.append((env, PlayerPolicy(env, player)))
        return episodes

    def make_answerer(self) -> Answerer:
        """The answerer the fields describe (the LLM one samples through ``backend``)."""
        if self.answerer == AnswererKind.KB:
            return KBAnswerer()
        from tinker_cookbook.completers import TinkerMessageCompleter

        from backend import ClientFuture, make_service_client, resolve_backend

        which = resolve_backend(self.answerer_backend)
        model = self.answerer_base_model or (SMOLLM2 if which == "local" else DEFAULT_LLM_ANSWERER)
        service = make_service_client(which, **({"base_url": self.base_url} if which == "tinker" else {}))
        client: Any = service.create_sampling_client(base_model=model)  # tinker's or the local one
        if isinstance(client, ClientFuture):
            client = client.result()
        completer = TinkerMessageCompleter(
            client,
            load_renderer(self.answerer_renderer_name or answerer_renderer_name(model), model),
            max_tokens=self.answerer_max_tokens,
            temperature=self.answerer_temperature,
        )
        return LLMAnswerer(completer)
