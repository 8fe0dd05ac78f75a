"""Two-seat zero-sum games against fixed opponents: the datasets every such game shares.

A game module supplies a :class:`Opponents` (its scripted players by name) and a
``make_game(rng)``; this module builds from them

- training groups (:class:`TwoSeatDataset`): ``group_size`` games each; the policy holds seat 0
  and the other seat is the policy too (self-play, both seats train, each centred within its own
  role) or drawn per game from a pool (``("self", "random")``), the policy's seat alternating by
  group;
- held-out groups (:func:`held_out_builders`): per fixed opponent, half the games with the policy
  in seat 0 and half in seat 1, tagged ``vs_<opponent>`` so ``eval.jsonl`` holds a win/draw/loss
  table per opponent;
- the figures read from such a table (:func:`score_figures`: win 1, draw 0.5, loss 0).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Renderer
from tinker_cookbook.rl.types import EnvGroupBuilder

from envs.datasets import GroupDataset
from envs.seats._builder import SeatedGroupBuilder, game_seed
from envs.seats._game import Game
from envs.seats._loop import LoopConfig
from envs.seats._players import Seat


@dataclass(frozen=True)
class Opponents:
    """A game's fixed opponents: ``make(name, seed)`` makes a fresh one for one game."""

    game: str
    """The game's name (in error messages)."""
    names: tuple[str, ...]
    make: Callable[[str, int], MessageCompleter]

    def player(self, name: str, rng: random.Random) -> MessageCompleter:
        """A fresh fixed opponent for one game (seeded from the game's RNG)."""
        if name not in self.names:
            raise ValueError(f"unknown {self.game} opponent {name!r}: one of {', '.join(self.names)}")
        return self.make(name, rng.randrange(2**31))

    def seat(self, name: str) -> Seat:
        """``self`` (the policy, trained) or a fixed opponent (pinned, made per game)."""
        if name == "self":
            return Seat.policy()
        if name not in self.names:
            raise ValueError(f"unknown {self.game} opponent {name!r}: self or one of {', '.join(self.names)}")
        return Seat.pinned(name, partial(self.player, name))

    def parse(self, text: str, *, fixed: bool = False) -> tuple[str, ...]:
        """``"self,random"`` -> ``("self", "random")`` (checked; ``fixed``: no ``self``)."""
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        if not names:
            raise ValueError("no opponent named")
        for n in names:
            self.seat(n)
        if fixed and "self" in names:
            raise ValueError(f"held-out opponents are fixed players ({', '.join(self.names)}), not self")
        return names


class TwoSeatDataset(GroupDataset):
    """Training groups (see the module docstring); group ``k`` is seeded from ``(seed, k)``."""

    def __init__(
        self,
        make_game: Callable[[random.Random], Game],
        renderer: Renderer,
        opponents: Opponents,
        *,
        batch_size: int,
        group_size: int,
        num_batches: int,
        pool: Sequence[str] = ("self",),
        seed: int = 0,
        loop: LoopConfig,
        stand_in: str = "random",
    ):
        super().__init__(batch_size, batch_size * num_batches)
        self.make_game = make_game
        self.renderer = renderer
        self.opponents = opponents
        self.group_size = group_size
        self.pool = tuple(pool)
        self.seed = seed
        self.loop = loop
        self.stand_in = stand_in

    def group(self, index: int) -> EnvGroupBuilder:
        seats = [self.opponents.seat(n) for n in self.pool]
        other = seats[0] if len(seats) == 1 else Seat.pool("+".join(self.pool), seats)
        policy_seat = 0 if other.is_policy else index % 2
        pair = [Seat.policy(), other] if policy_seat == 0 else [other, Seat.policy()]
        return SeatedGroupBuilder(
            make_game=self.make_game,
            renderer=self.renderer,
            seats=tuple(pair),
            games=self.group_size,
            seed=game_seed(self.seed, index),
            loop=self.loop,
            tags=(self.opponents.game, "train"),
            stand_in=self.opponents.seat(self.stand_in),
        )


def held_out_builders(
    make_game: Callable[[random.Random], Game],
    renderer: Renderer,
    opponents: Opponents,
    names: Sequence[str],
    games: int,
    *,
    seed: int = 0,
    loop: LoopConfig,
) -> list[SeatedGroupBuilder]:
    """Held-out games: per opponent, ``games // 2`` with the policy in seat 0 and as many in seat 1."""
    out = []
    for k, name in enumerate(names):
        opponent = opponents.seat(name)
        if opponent.is_policy:
            raise ValueError("held-out opponents are fixed players, not 'self'")
        for seat in (0, 1):
            pair = (Seat.policy(), opponent) if seat == 0 else (opponent, Seat.policy())
            out.append(
                SeatedGroupBuilder(
                    make_game=make_game,
                    renderer=renderer,
                    seats=pair,
                    games=max(1, games // 2),
                    seed=game_seed(seed, 2 * k + seat),
                    loop=loop,
                    tags=(opponents.game, f"vs_{name}"),
                )
            )
    return out


class FixedDataset(GroupDataset):
    """A dataset of given builders, all in one batch."""

    def __init__(self, builders: Sequence[EnvGroupBuilder]):
        super().__init__(max(1, len(builders)), len(builders))
        self.builders = list(builders)

    def group(self, index: int) -> EnvGroupBuilder:
        return self.builders[index]


def score_figures(metrics: Mapping[str, Any], prefix: str, opponents: str) -> dict[str, float]:
    """``score_vs_<opponent>`` (win 1, draw 0.5, loss 0) per held-out opponent (a comma list) from
    the ``eval/env/vs_<opponent>/<prefix>/{win,draw}`` means, and the share of the policy's games
    that ended on its own illegal move (``illegal_rate``). A game without draws has no draw key."""
    out: dict[str, float] = {}
    for name in opponents.split(","):
        name = name.strip()
        win = metrics.get(f"env/vs_{name}/{prefix}/win")
        draw = metrics.get(f"env/vs_{name}/{prefix}/draw", 0.0)
        if isinstance(win, int | float) and isinstance(draw, int | float):
            out[f"score_vs_{name}"] = float(win) + 0.5 * float(draw)
    illegal = metrics.get(f"env/all/{prefix}/illegal")
    if isinstance(illegal, int | float):
        out["illegal_rate"] = float(illegal)
    return out
