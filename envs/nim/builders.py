"""Nim datasets (:class:`envs.seats.TwoSeatDatasetBuilder` with this game's rules and players):
self-play (or pinned-opponent) training groups, held-out games against fixed opponents, and
scripted games for a warm start.

- Training: each group is ``group_size`` games, each with its own pile; by default the policy
  holds both seats (self-play) and both train, each centred within its own role (first, second).
  ``train_opponents="self,random"`` draws the second seat per game from a pool.
- Held-out (:func:`eval_builders`): per fixed opponent (``random``, ``optimal``), half the games
  with the policy moving first, half second; ``eval.jsonl`` holds a win/loss table per opponent
  (``eval/env/vs_random/nim/win`` ...).
- Warm start (``scripted_episodes``): the optimal player (by default playing random legal moves
  only, ``scripted_noise=1``: the move format, not the play) holds one seat against a random player.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import partial

import chz
from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Renderer

from envs.nim.config import NimConfig
from envs.nim.env import NimGame
from envs.nim.players import OptimalPlayer, RandomPlayer
from envs.seats import LoopConfig, Opponents, SeatedGroupBuilder, TwoSeatDatasetBuilder

OPPONENTS = ("random", "optimal")
"""The fixed opponents by name."""


def _make(config: NimConfig, name: str, seed: int) -> MessageCompleter:
    if name == "random":
        return RandomPlayer(seed, config.max_take)
    return OptimalPlayer(seed, config.max_take)


def opponents(config: NimConfig | None = None) -> Opponents:
    """This game's fixed opponents (``random``, ``optimal``) under ``config``'s rules."""
    return Opponents("nim", OPPONENTS, partial(_make, config or NimConfig()))


def make_opponent(name: str, rng: random.Random) -> MessageCompleter:
    """A fresh fixed opponent for one game of the default rules (seeded from the game's RNG)."""
    return opponents().player(name, rng)


@chz.chz
class NimDatasetBuilder(TwoSeatDatasetBuilder):
    """Train (self-play by default) and held-out (fixed opponents) datasets."""

    env: NimConfig = chz.field(default_factory=NimConfig)

    def opponents(self) -> Opponents:
        return opponents(self.env)

    def make_game(self) -> Callable[[random.Random], NimGame]:
        return partial(NimGame.drawn, self.env)

    def scripted_player(self, seed: int) -> MessageCompleter:
        return OptimalPlayer(seed, self.env.max_take, noise=self.scripted_noise)

    def loop(self) -> LoopConfig:
        return LoopConfig(max_moves=self.env.pile_max)


def eval_builders(
    renderer: Renderer, config: NimConfig, names: Sequence[str], games: int, seed: int = 0
) -> list[SeatedGroupBuilder]:
    """Held-out games: per opponent, ``games // 2`` with the policy first and as many second."""
    builder = NimDatasetBuilder(env=config, eval_opponents=",".join(names), eval_games=games, eval_seed=seed)
    return builder.eval_builders(renderer)
