"""Tic-tac-toe datasets: self-play (or pinned-opponent) training groups, held-out games against
fixed opponents, and scripted games for a warm start.

:class:`envs.seats.TwoSeatDatasetBuilder` with this game's rules and players.

- Training: each group is ``group_size`` games; by default the policy
  holds both seats (self-play) and both seats train, X and O each centred within its own role.
  ``train_opponents="self,random"`` draws the second seat per game from a pool (the policy, or a
  random player), the policy's seat alternating X / O by group.
- Held-out (:func:`eval_builders`): for each fixed opponent (``random``, ``optimal``), half the
  games with the policy as X, half as O, each opponent seeded per game from ``eval_seed``; the
  groups are tagged ``vs_<opponent>`` (and ``as_x`` / ``as_o``), so ``eval.jsonl`` holds a
  win/draw/loss table per opponent (``eval/env/vs_random/tictactoe/win`` ...).
- Warm start (:meth:`TicTacToeDatasetBuilder.scripted_episodes`): the minimax player plays one
  seat against a random player (:class:`envs.seats.SoloSeatEnv`, the scripted seat inline).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import partial

import chz
from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Renderer

from envs.seats import (
    LoopConfig,
    Opponents,
    Seat,
    SeatedGroupBuilder,
    TwoSeatDatasetBuilder,
    held_out_builders,
)
from envs.tictactoe.config import TicTacToeConfig
from envs.tictactoe.env import TicTacToeGame
from envs.tictactoe.players import OptimalPlayer, RandomPlayer

OPPONENTS = ("random", "optimal")
"""The fixed opponents by name."""
LOOP = LoopConfig(max_moves=9)


def _make(name: str, seed: int) -> MessageCompleter:
    return RandomPlayer(seed) if name == "random" else OptimalPlayer(seed)


TICTACTOE_OPPONENTS = Opponents("tictactoe", OPPONENTS, _make)
"""This game's fixed opponents."""


def make_opponent(name: str, rng: random.Random) -> MessageCompleter:
    """A fresh fixed opponent for one game (seeded from the game's RNG)."""
    return TICTACTOE_OPPONENTS.player(name, rng)


def _new_game(config: TicTacToeConfig, rng: random.Random) -> TicTacToeGame:
    return TicTacToeGame(config)


def opponent_seat(name: str) -> Seat:
    """``self`` (the policy, trained) or a fixed opponent (pinned, made per game)."""
    return TICTACTOE_OPPONENTS.seat(name)


def parse_opponents(text: str) -> tuple[str, ...]:
    """``"self,random"`` -> ``("self", "random")`` (checked)."""
    return TICTACTOE_OPPONENTS.parse(text)


@chz.chz
class TicTacToeDatasetBuilder(TwoSeatDatasetBuilder):
    """Train (self-play by default) and held-out (fixed opponents) datasets."""

    env: TicTacToeConfig = chz.field(default_factory=TicTacToeConfig)
    scripted_noise: float = 0.0
    """Warm start: how often the scripted minimax player plays a random cell instead."""

    def opponents(self) -> Opponents:
        return TICTACTOE_OPPONENTS

    def make_game(self) -> Callable[[random.Random], TicTacToeGame]:
        return partial(_new_game, self.env)

    def scripted_player(self, seed: int) -> MessageCompleter:
        return OptimalPlayer(seed, noise=self.scripted_noise)

    def loop(self) -> LoopConfig:
        return LOOP


def eval_builders(
    renderer: Renderer,
    config: TicTacToeConfig,
    opponents: Sequence[str],
    games: int,
    seed: int = 0,
) -> list[SeatedGroupBuilder]:
    """Held-out games: per opponent, ``games // 2`` with the policy as X and as many as O."""
    return held_out_builders(
        partial(_new_game, config), renderer, TICTACTOE_OPPONENTS, opponents, games, seed=seed, loop=LOOP
    )
