"""Nim datasets (:mod:`envs.seats`'s two-seat datasets with this game's players): self-play (or
pinned-opponent) training groups, held-out games against fixed opponents, and scripted games for
a warm start.

- Training: each group is ``group_size`` games, each with its own pile; by default the policy
  holds both seats (self-play) and both train, each centred within its own role (first, second).
  ``train_opponents="self,random"`` draws the second seat per game from a pool.
- Held-out (:func:`eval_builders`): per fixed opponent (``random``, ``optimal``), half the games
  with the policy moving first, half second; ``eval.jsonl`` holds a win/loss table per opponent
  (``eval/env/vs_random/nim/win`` ...).
- Warm start (:meth:`NimDatasetBuilder.scripted_episodes`): a scripted player (random legal moves
  by default: the move format, not the play) holds one seat against a random player.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import partial

import chz
from tinker_cookbook.completers import MessageCompleter, TokenCompleter
from tinker_cookbook.renderers import Renderer
from tinker_cookbook.rl.types import Env, RLDatasetBuilder

from backend.model import SMOLLM2
from envs.datasets import GroupDataset
from envs.nim.config import NimConfig
from envs.nim.env import NimGame
from envs.nim.players import OptimalPlayer, RandomPlayer
from envs.player import PlayerPolicy
from envs.seats import (
    FixedDataset,
    LoopConfig,
    Opponents,
    SeatedGroupBuilder,
    SoloSeatEnv,
    TwoSeatDataset,
    game_seed,
    held_out_builders,
)
from renderers_ext import load_renderer

OPPONENTS = ("random", "optimal")
"""The fixed opponents by name."""


def _make(config: NimConfig, name: str, seed: int) -> MessageCompleter:
    if name == "random":
        return RandomPlayer(seed, config.max_take)
    return OptimalPlayer(seed, config.max_take)


def opponents(config: NimConfig | None = None) -> Opponents:
    """This game's fixed opponents (``random``, ``optimal``) for ``config``'s rules."""
    return Opponents("nim", OPPONENTS, partial(_make, config or NimConfig()))


def make_opponent(name: str, rng: random.Random) -> MessageCompleter:
    """A fresh fixed opponent for one game of the default rules (seeded from the game's RNG)."""
    return opponents().player(name, rng)


def _loop(config: NimConfig) -> LoopConfig:
    return LoopConfig(max_moves=config.pile_max)


def eval_builders(
    renderer: Renderer, config: NimConfig, names: Sequence[str], games: int, seed: int = 0
) -> list[SeatedGroupBuilder]:
    """Held-out games: per opponent, ``games // 2`` with the policy first and as many second."""
    return held_out_builders(
        partial(NimGame.drawn, config),
        renderer,
        opponents(config),
        names,
        games,
        seed=seed,
        loop=_loop(config),
    )


@chz.chz
class NimDatasetBuilder(RLDatasetBuilder):
    """Train (self-play by default) and held-out (fixed opponents) datasets."""

    batch_size: int = 8
    """Groups per batch."""
    group_size: int = 8
    """Games per group."""
    num_batches: int = 16
    model_name_for_tokenizer: str = SMOLLM2
    renderer_name: str | None = None
    env: NimConfig = chz.field(default_factory=NimConfig)
    seed: int = 0
    train_opponents: str = "self"
    """Who holds the other seat in training: ``self`` (self-play), ``random``, ``optimal``, or a
    comma list drawn per game (``self,random``)."""
    eval_opponents: str = "random,optimal"
    """The fixed opponents of the held-out games."""
    eval_games: int = 64
    """Held-out games per opponent (half moving first, half second)."""
    eval_seed: int = 0
    scripted_noise: float = 1.0
    """Warm start: how often the scripted optimal player plays a random legal move instead (1:
    always, the format without the play)."""

    @chz.validate
    def _check(self) -> None:
        if self.batch_size < 1 or self.group_size < 1 or self.num_batches < 1 or self.eval_games < 2:
            raise ValueError("batch_size, group_size, num_batches must be >= 1 and eval_games >= 2")
        opponents(self.env).parse(self.train_opponents)
        opponents(self.env).parse(self.eval_opponents, fixed=True)

    def renderer(self) -> Renderer:
        return load_renderer(self.renderer_name, self.model_name_for_tokenizer)

    async def __call__(self) -> tuple[TwoSeatDataset, GroupDataset]:
        renderer = self.renderer()
        them = opponents(self.env)
        train = TwoSeatDataset(
            partial(NimGame.drawn, self.env),
            renderer,
            them,
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=self.num_batches,
            pool=them.parse(self.train_opponents),
            seed=self.seed,
            loop=_loop(self.env),
        )
        names = them.parse(self.eval_opponents, fixed=True)
        test = FixedDataset(eval_builders(renderer, self.env, names, self.eval_games, self.eval_seed))
        return train, test

    async def scripted_episodes(self, n: int, seed: int) -> list[tuple[Env, TokenCompleter]]:
        """``n`` scripted games (``training.SupportsScriptedEpisodes``): the scripted player moves
        first in even games, second in odd ones, against a random player seeded per game."""
        renderer = self.renderer()
        them = opponents(self.env)
        episodes: list[tuple[Env, TokenCompleter]] = []
        for i in range(n):
            rng = random.Random(game_seed(seed, i))
            seat = i % 2
            game = NimGame.drawn(self.env, rng)
            env = SoloSeatEnv(game, seat, renderer, {1 - seat: them.player("random", rng)})
            player = OptimalPlayer(rng.randrange(2**31), self.env.max_take, noise=self.scripted_noise)
            episodes.append((env, PlayerPolicy(env, player)))
        return episodes
