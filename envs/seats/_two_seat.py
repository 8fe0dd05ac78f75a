"""Two-seat zero-sum games against fixed opponents: the datasets every such game shares.

A game module supplies a :class:`Opponents` (its scripted players by name) and a
``make_game(rng)``; this module builds from them

- training groups (:class:`TwoSeatDataset`): ``group_size`` games each; the policy holds seat 0
  and the other seat is the policy too (self-play, both seats train, each centred within its own
  role) or drawn per game from a pool (``("self", "random")``), the policy's seat alternating by
  group; an opponent is a scripted player of the game or a model (``base``, ``checkpoint:<path>``:
  :mod:`envs.seats._models`), frozen either way;
- held-out groups (:func:`held_out_builders`): per fixed opponent, half the games with the policy
  in seat 0 and half in seat 1, tagged ``vs_<opponent>`` so ``eval.jsonl`` holds a win/draw/loss
  table per opponent;
- both datasets and the scripted games of a warm start from a chz builder
  (:class:`TwoSeatDatasetBuilder`: a game subclasses it with its rules as ``env`` and three hooks).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import chz
from tinker_cookbook.completers import MessageCompleter, TokenCompleter
from tinker_cookbook.renderers import Renderer
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RLDatasetBuilder

from backend.model import SMOLLM2
from envs.datasets import GroupDataset
from envs.player import PlayerPolicy
from envs.seats._builder import SeatedGroupBuilder, game_seed
from envs.seats._game import Game
from envs.seats._loop import LoopConfig
from envs.seats._models import backend_of, check_model, is_model, model_player, opponent_tag
from envs.seats._players import Seat
from envs.seats._solo import SoloSeatEnv
from renderers_ext import load_renderer


@dataclass(frozen=True)
class Opponents:
    """A game's fixed opponents: ``make(name, seed)`` makes a fresh scripted one for one game;
    ``models`` holds the model opponents (``base``, ``checkpoint:<path>``) once loaded."""

    game: str
    """The game's name (in error messages)."""
    names: tuple[str, ...]
    make: Callable[[str, int], MessageCompleter]
    models: Mapping[str, TokenCompleter] = field(default_factory=dict)
    """Loaded model opponents by name (:meth:`TwoSeatDatasetBuilder.loaded_opponents`)."""

    def player(self, name: str, rng: random.Random) -> MessageCompleter:
        """A fresh fixed opponent for one game (seeded from the game's RNG)."""
        if name not in self.names:
            raise ValueError(f"unknown {self.game} opponent {name!r}: one of {', '.join(self.names)}")
        return self.make(name, rng.randrange(2**31))

    def seat(self, name: str) -> Seat:
        """``self`` (the policy, trained), a scripted opponent (pinned, made per game) or a loaded
        model opponent (pinned, frozen)."""
        if name == "self":
            return Seat.policy()
        if is_model(name):
            if name not in self.models:
                raise ValueError(
                    f"model opponent {name!r} is not loaded (TwoSeatDatasetBuilder.loaded_opponents)"
                )
            return Seat.pinned(name, self.models[name])
        if name not in self.names:
            raise ValueError(
                f"unknown {self.game} opponent {name!r}: self, {', '.join(self.names)}, base or checkpoint:<path>"
            )
        return Seat.pinned(name, partial(self.player, name))

    def parse(self, text: str, *, fixed: bool = False) -> tuple[str, ...]:
        """``"self,random"`` -> ``("self", "random")`` (names checked, model opponents by their
        syntax only; ``fixed``: no ``self``)."""
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        if not names:
            raise ValueError("no opponent named")
        for n in names:
            if not is_model(n):
                self.seat(n)
        if fixed and "self" in names:
            raise ValueError(
                f"held-out opponents are fixed players ({', '.join(self.names)}, base, checkpoint:<path>), not self"
            )
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
                    tags=(opponents.game, f"vs_{opponent_tag(name)}"),
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


@chz.chz
class TwoSeatDatasetBuilder(RLDatasetBuilder):
    """Train (self-play by default) and held-out (fixed opponents) datasets of a two-seat game.

    A game subclasses it, adds its rules as a field ``env``, and writes :meth:`opponents`,
    :meth:`make_game`, :meth:`scripted_player` (and :meth:`loop` when a game can run long)."""

    batch_size: int = 8
    """Groups per batch."""
    group_size: int = 8
    """Games per group."""
    num_batches: int = 16
    model_name_for_tokenizer: str = SMOLLM2
    renderer_name: str | None = None
    seed: int = 0
    train_opponents: str = "self"
    """Who holds the other seat in training: ``self`` (self-play), a fixed opponent (a scripted
    player, ``base``: the base model, ``checkpoint:<path>``: a frozen checkpoint), or a comma list
    drawn per game (``self,random``; several checkpoints: a pool of past checkpoints)."""
    eval_opponents: str = "random,optimal"
    """The fixed opponents of the held-out games (model opponents too)."""
    eval_games: int = 64
    """Held-out games per opponent (half in each seat)."""
    eval_seed: int = 0
    scripted_noise: float = 1.0
    """Warm start: how often the scripted player plays a random legal move instead of its best
    one (1: always, the format without the play; 0: the scripted player's own games)."""
    backend: str = "auto"
    """Backend of the model opponents' sampling clients (``local``, ``tinker``, ``auto``)."""
    base_url: str | None = None
    """Tinker service address of the model opponents (None: the SDK's default)."""
    checkpoint_root: str | None = None
    """Where ``local://`` paths of ``checkpoint:`` opponents live (the run's checkpoint folder)."""
    opponent_max_tokens: int = 8
    """Sampling budget of a model opponent's move."""
    opponent_temperature: float = 1.0
    """Sampling temperature of a model opponent (the train config passes its ``eval_temperature``)."""

    @chz.validate
    def _check(self) -> None:
        if self.batch_size < 1 or self.group_size < 1 or self.num_batches < 1 or self.eval_games < 2:
            raise ValueError("batch_size, group_size, num_batches must be >= 1 and eval_games >= 2")
        root = self._checkpoint_root()
        for name in self._model_opponents():
            check_model(name, backend=backend_of(self.backend), root=root)

    def opponents(self) -> Opponents:
        """The game's fixed opponents under its rules."""
        raise NotImplementedError

    def make_game(self) -> Callable[[random.Random], Game]:
        """``make_game(rng)``: a fresh game (picklable)."""
        raise NotImplementedError

    def scripted_player(self, seed: int) -> MessageCompleter:
        """The warm start's scripted player (``scripted_noise`` applied)."""
        raise NotImplementedError

    def loop(self) -> LoopConfig:
        """The game loop's settings (its move budget)."""
        return LoopConfig()

    def renderer(self) -> Renderer:
        return load_renderer(self.renderer_name, self.model_name_for_tokenizer)

    async def loaded_opponents(self) -> Opponents:
        """:meth:`opponents` with the model opponents named in ``train_opponents`` and
        ``eval_opponents`` loaded (each on its own sampling client, frozen)."""
        root = self._checkpoint_root()
        models: dict[str, TokenCompleter] = {}
        for name in self._model_opponents():
            models[name] = await model_player(
                name,
                model=self.model_name_for_tokenizer,
                backend=self.backend,
                root=root,
                base_url=self.base_url,
                max_tokens=self.opponent_max_tokens,
                temperature=self.opponent_temperature,
            )
        return replace(self.opponents(), models=models)

    def _model_opponents(self) -> list[str]:
        """The model opponents named in ``train_opponents`` and ``eval_opponents``, once each."""
        them = self.opponents()
        names = them.parse(self.train_opponents) + them.parse(self.eval_opponents, fixed=True)
        return list(dict.fromkeys(n for n in names if is_model(n)))

    def _checkpoint_root(self) -> Path | None:
        return Path(self.checkpoint_root) if self.checkpoint_root else None

    def eval_builders(
        self, renderer: Renderer, opponents: Opponents | None = None
    ) -> list[SeatedGroupBuilder]:
        """The held-out games (:func:`held_out_builders`; ``opponents``: with the model
        opponents loaded, needed when ``eval_opponents`` names one)."""
        them = opponents or self.opponents()
        names = them.parse(self.eval_opponents, fixed=True)
        return held_out_builders(
            self.make_game(), renderer, them, names, self.eval_games, seed=self.eval_seed, loop=self.loop()
        )

    async def __call__(self) -> tuple[TwoSeatDataset, GroupDataset]:
        renderer = self.renderer()
        them = await self.loaded_opponents()
        train = TwoSeatDataset(
            self.make_game(),
            renderer,
            them,
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=self.num_batches,
            pool=them.parse(self.train_opponents),
            seed=self.seed,
            loop=self.loop(),
        )
        return train, FixedDataset(self.eval_builders(renderer, them))

    async def scripted_episodes(self, n: int, seed: int) -> list[tuple[Env, TokenCompleter]]:
        """``n`` scripted games (``training.SupportsScriptedEpisodes``): the scripted player in
        seat 0 in even games, in seat 1 in odd ones, against a random player seeded per game."""
        renderer = self.renderer()
        them = self.opponents()
        make_game = self.make_game()
        episodes: list[tuple[Env, TokenCompleter]] = []
        for i in range(n):
            rng = random.Random(game_seed(seed, i))
            seat = i % 2
            env = SoloSeatEnv(make_game(rng), seat, renderer, {1 - seat: them.player("random", rng)})
            episodes.append((env, PlayerPolicy(env, self.scripted_player(rng.randrange(2**31)))))
        return episodes
