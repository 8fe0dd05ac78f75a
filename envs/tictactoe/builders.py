"""Tic-tac-toe datasets: self-play (or pinned-opponent) training groups, held-out games against
fixed opponents, and scripted games for a warm start.

Built on :mod:`envs.seats`'s two-seat datasets (:class:`~envs.seats.TwoSeatDataset`, ...) with this
game's players.

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
from collections.abc import Sequence
from functools import partial

import chz
from tinker_cookbook.completers import MessageCompleter, TokenCompleter
from tinker_cookbook.renderers import Renderer
from tinker_cookbook.rl.types import Env, RLDatasetBuilder

from backend.model import SMOLLM2
from envs.datasets import GroupDataset
from envs.player import PlayerPolicy
from envs.seats import (
    FixedDataset,
    LoopConfig,
    Opponents,
    Seat,
    SeatedGroupBuilder,
    SoloSeatEnv,
    TwoSeatDataset,
    game_seed,
    held_out_builders,
)
from envs.tictactoe.config import TicTacToeConfig
from envs.tictactoe.env import TicTacToeGame
from envs.tictactoe.players import OptimalPlayer, RandomPlayer
from renderers_ext import load_renderer

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


@chz.chz
class TicTacToeDatasetBuilder(RLDatasetBuilder):
    """Train (self-play by default) and held-out (fixed opponents) datasets."""

    batch_size: int = 8
    """Groups per batch."""
    group_size: int = 8
    """Games per group."""
    num_batches: int = 16
    model_name_for_tokenizer: str = SMOLLM2
    renderer_name: str | None = None
    env: TicTacToeConfig = chz.field(default_factory=TicTacToeConfig)
    seed: int = 0
    train_opponents: str = "self"
    """Who holds the other seat in training: ``self`` (self-play), ``random``, ``optimal``, or a
    comma list drawn per game (``self,random``)."""
    eval_opponents: str = "random,optimal"
    """The fixed opponents of the held-out games."""
    eval_games: int = 64
    """Held-out games per opponent (half as X, half as O)."""
    eval_seed: int = 0
    scripted_noise: float = 0.0
    """Warm start: how often the scripted minimax player plays a random cell instead."""

    @chz.validate
    def _check(self) -> None:
        if self.batch_size < 1 or self.group_size < 1 or self.num_batches < 1 or self.eval_games < 2:
            raise ValueError("batch_size, group_size, num_batches must be >= 1 and eval_games >= 2")
        parse_opponents(self.train_opponents)
        TICTACTOE_OPPONENTS.parse(self.eval_opponents, fixed=True)

    def renderer(self) -> Renderer:
        return load_renderer(self.renderer_name, self.model_name_for_tokenizer)

    async def __call__(self) -> tuple[TwoSeatDataset, GroupDataset]:
        renderer = self.renderer()
        train = TwoSeatDataset(
            partial(_new_game, self.env),
            renderer,
            TICTACTOE_OPPONENTS,
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=self.num_batches,
            pool=parse_opponents(self.train_opponents),
            seed=self.seed,
            loop=LOOP,
        )
        test = FixedDataset(
            eval_builders(
                renderer, self.env, parse_opponents(self.eval_opponents), self.eval_games, self.eval_seed
            )
        )
        return train, test

    async def scripted_episodes(self, n: int, seed: int) -> list[tuple[Env, TokenCompleter]]:
        """``n`` scripted games (``training.SupportsScriptedEpisodes``): the minimax player as X
        in even games, as O in odd ones, against a random player seeded per game."""
        renderer = self.renderer()
        episodes: list[tuple[Env, TokenCompleter]] = []
        for i in range(n):
            rng = random.Random(game_seed(seed, i))
            seat = i % 2
            env = SoloSeatEnv(
                TicTacToeGame(self.env), seat, renderer, {1 - seat: make_opponent("random", rng)}
            )
            player = OptimalPlayer(rng.randrange(2**31), noise=self.scripted_noise)
            episodes.append((env, PlayerPolicy(env, player)))
        return episodes
