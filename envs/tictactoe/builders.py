"""Tic-tac-toe datasets: self-play (or pinned-opponent) training groups, held-out games against
fixed opponents, and scripted games for a warm start.

- Training (:class:`TicTacToeDataset`): each group is ``group_size`` games; by default the policy
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
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RLDatasetBuilder

from backend.model import SMOLLM2
from envs.datasets import GroupDataset
from envs.player import PlayerPolicy
from envs.seats import LoopConfig, Seat, SeatedGroupBuilder, SoloSeatEnv, game_seed
from envs.tictactoe.config import TicTacToeConfig
from envs.tictactoe.env import TicTacToeGame
from envs.tictactoe.players import OptimalPlayer, RandomPlayer
from renderers_ext import load_renderer

OPPONENTS = ("random", "optimal")
"""The fixed opponents by name."""


def make_opponent(name: str, rng: random.Random) -> MessageCompleter:
    """A fresh fixed opponent for one game (seeded from the game's RNG)."""
    seed = rng.randrange(2**31)
    if name == "random":
        return RandomPlayer(seed)
    if name == "optimal":
        return OptimalPlayer(seed)
    raise ValueError(f"unknown tic-tac-toe opponent {name!r}: one of {', '.join(OPPONENTS)}")


def _new_game(config: TicTacToeConfig, rng: random.Random) -> TicTacToeGame:
    return TicTacToeGame(config)


def opponent_seat(name: str) -> Seat:
    """``self`` (the policy, trained) or a fixed opponent (pinned, made per game)."""
    if name == "self":
        return Seat.policy()
    if name not in OPPONENTS:
        raise ValueError(f"unknown tic-tac-toe opponent {name!r}: self or one of {', '.join(OPPONENTS)}")
    return Seat.pinned(name, partial(make_opponent, name))


def parse_opponents(text: str) -> tuple[str, ...]:
    """``"self,random"`` -> ``("self", "random")`` (checked)."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError("no opponent named")
    for n in names:
        opponent_seat(n)
    return names


class TicTacToeDataset(GroupDataset):
    """Training groups (see the module docstring); group ``k`` is seeded from ``(seed, k)``."""

    def __init__(
        self,
        renderer: Renderer,
        config: TicTacToeConfig,
        *,
        batch_size: int,
        group_size: int,
        num_batches: int,
        opponents: Sequence[str] = ("self",),
        seed: int = 0,
        loop: LoopConfig | None = None,
    ):
        super().__init__(batch_size, batch_size * num_batches)
        self.renderer = renderer
        self.config = config
        self.group_size = group_size
        self.opponents = tuple(opponents)
        self.seed = seed
        self.loop = loop or LoopConfig(max_moves=9)

    def group(self, index: int) -> EnvGroupBuilder:
        seats = [opponent_seat(n) for n in self.opponents]
        other = seats[0] if len(seats) == 1 else Seat.pool("+".join(self.opponents), seats)
        policy_seat = 0 if other.is_policy else index % 2
        pair = [Seat.policy(), other] if policy_seat == 0 else [other, Seat.policy()]
        return SeatedGroupBuilder(
            make_game=partial(_new_game, self.config),
            renderer=self.renderer,
            seats=tuple(pair),
            games=self.group_size,
            seed=game_seed(self.seed, index),
            loop=self.loop,
            tags=("tictactoe", "train"),
            stand_in=opponent_seat("random"),
        )


def eval_builders(
    renderer: Renderer,
    config: TicTacToeConfig,
    opponents: Sequence[str],
    games: int,
    seed: int = 0,
) -> list[SeatedGroupBuilder]:
    """Held-out games: per opponent, ``games // 2`` with the policy as X and as many as O."""
    out = []
    for k, name in enumerate(opponents):
        opponent = opponent_seat(name)
        if opponent.is_policy:
            raise ValueError("held-out opponents are fixed players, not 'self'")
        for seat in (0, 1):
            pair = (Seat.policy(), opponent) if seat == 0 else (opponent, Seat.policy())
            out.append(
                SeatedGroupBuilder(
                    make_game=partial(_new_game, config),
                    renderer=renderer,
                    seats=pair,
                    games=max(1, games // 2),
                    seed=game_seed(seed, 2 * k + seat),
                    loop=LoopConfig(max_moves=9),
                    tags=("tictactoe", f"vs_{name}"),
                )
            )
    return out


class _Fixed(GroupDataset):
    """A dataset of given builders, all in one batch."""

    def __init__(self, builders: Sequence[EnvGroupBuilder]):
        super().__init__(max(1, len(builders)), len(builders))
        self.builders = list(builders)

    def group(self, index: int) -> EnvGroupBuilder:
        return self.builders[index]


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
        parse_opponents(self.eval_opponents)
        if "self" in parse_opponents(self.eval_opponents):
            raise ValueError("eval_opponents are fixed players (random, optimal), not self")

    def renderer(self) -> Renderer:
        return load_renderer(self.renderer_name, self.model_name_for_tokenizer)

    async def __call__(self) -> tuple[TicTacToeDataset, GroupDataset]:
        renderer = self.renderer()
        train = TicTacToeDataset(
            renderer,
            self.env,
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=self.num_batches,
            opponents=parse_opponents(self.train_opponents),
            seed=self.seed,
        )
        test = _Fixed(
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
