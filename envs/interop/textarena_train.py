"""Train on a TextArena single-player game through the adapter:
``python -m envs.interop.textarena_train [key=value ...]``.

With no arguments: GuessTheNumber-v0 (a number in 1..20, ten guesses, the game's reward: 1 for
the number, else how close the guesses came) with the embedded SmolLM2-135M on the local backend
(offline), in two stages, each reported on its own in ``eval.jsonl`` (``stage``: ``untrained``,
``warm_start``, ``rl``):

1. **Warm start** (``warm_start.*``): ``cross_entropy`` steps on games a scripted bisecting
   player plays through the adapter (it reads the game's "higher"/"lower" answers), so the policy
   learns the move format (``[n]``) and some of the play.
2. **RL**: groups of ``group_size`` episodes of one seed, centred within the group.

Held-out games are the seeds from ``eval_seed`` on (``eval_games`` of them, apart from the train
seeds ``seed * 100_000 + i``), played greedily. ``game=`` picks another game (the bisecting
player is GuessTheNumber's; ``warm_start.episodes=0`` for games without one). Every key of
:class:`training.Config` works; ``--help`` lists them.

A multi-player game (``game=TicTacToe-v0``, ``KuhnPoker-v0``...) trains through the multi-seat
form (:func:`envs.interop.textarena.textarena_seated`): by self-play (``opponent=self``: every
seat is the policy and trains, each centred within its seat's role in its group of
``group_size`` games) or against random players (``opponent=random``, the policy on seat 0). Its
held-out games put the policy on seat 0 against :class:`~envs.interop.textarena.RandomMove`
players (tagged ``vs_random``); its warm start is random moves on seat 0 against random players
(the move format, not the play).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import anyio
import chz
from tinker_cookbook.completers import MessageCompleter, TokenCompleter
from tinker_cookbook.renderers import Message, get_text_content
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RLDataset, RLDatasetBuilder

import training
from backend.model import SMOLLM2
from envs.datasets import GroupDataset
from envs.interop.textarena import (
    OPPONENTS,
    RandomMove,
    TextArenaGame,
    TextArenaGroup,
    make_game,
    players_of,
    textarena_seated,
)
from envs.player import PlayerPolicy
from envs.seats import SoloSeatEnv, game_seed

TRAIN_SEED_BASE = 100_000
"""Train seeds are ``seed * TRAIN_SEED_BASE + i``; held-out seeds ``eval_seed + i`` stay below."""


class Bisector(MessageCompleter):
    """GuessTheNumber's scripted player: bisects 1..``high`` from the game's answers."""

    def __init__(self, high: int = 20):
        self.high = high

    async def __call__(self, messages: list[Message]) -> Message:
        low, high = 1, self.high
        guesses = [m for m in messages if m["role"] == "assistant"]
        answers = [m for m in messages if m["role"] == "user"][1:]
        for guess, answer in zip(guesses, answers, strict=False):
            found = re.search(r"\[(\d+)\]", get_text_content(guess))
            if found is None:
                continue
            n, text = int(found.group(1)), get_text_content(answer)
            if "higher" in text:
                low = max(low, n + 1)
            elif "lower" in text:
                high = min(high, n - 1)
        return {"role": "assistant", "content": f"[{(low + high) // 2}]"}


class _Seeds(GroupDataset):
    def __init__(
        self,
        game: str,
        seeds: list[int],
        batch_size: int,
        group_size: int,
        renderer_name: str | None,
        model: str,
        players: int = 1,
        opponent: str = "self",
        tags: tuple[str, ...] = (),
    ):
        super().__init__(batch_size, len(seeds))
        self.game, self.seeds, self.group_size = game, seeds, group_size
        self.renderer_name, self.model = renderer_name, model
        self.players, self.opponent, self.tags = players, opponent, tags

    def group(self, index: int) -> EnvGroupBuilder:
        if self.players > 1:
            return textarena_seated(
                self.game,
                seed=self.seeds[index],
                games=self.group_size,
                opponent=self.opponent,
                players=self.players,
                renderer_name=self.renderer_name,
                model_name_for_tokenizer=self.model,
                tags=self.tags,
            )
        return TextArenaGroup(
            self.game,
            seed=self.seeds[index],
            group_size=self.group_size,
            renderer_name=self.renderer_name,
            model_name_for_tokenizer=self.model,
        )


@chz.chz
class TextArenaDatasetBuilder(RLDatasetBuilder):
    """Train groups (one seed each) and held-out games of one TextArena game."""

    game: str = "GuessTheNumber-v0"
    batch_size: int = 4
    group_size: int = 8
    num_batches: int = 16
    eval_games: int = 32
    eval_seed: int = 0
    seed: int = 0
    renderer_name: str | None = None
    model_name_for_tokenizer: str = SMOLLM2
    opponent: str = "self"
    """Multi-player games: who holds the other seats in training (``self`` or ``random``)."""

    @chz.validate
    def _check(self) -> None:
        if self.opponent not in OPPONENTS:
            raise ValueError(f"opponent must be one of {', '.join(OPPONENTS)}, got {self.opponent!r}")

    async def _players(self) -> int:
        """The game's player count (1 for a single-player game, or one that cannot run here:
        its groups then fail with the game's one-line reason)."""
        return await anyio.to_thread.run_sync(players_of, self.game) or 1

    async def __call__(self) -> tuple[RLDataset, RLDataset]:
        n = self.batch_size * self.num_batches
        train_seeds = [(self.seed + 1) * TRAIN_SEED_BASE + i for i in range(n)]
        held_out = [self.eval_seed + i for i in range(self.eval_games)]
        model = self.model_name_for_tokenizer
        players = await self._players()
        train = _Seeds(
            self.game, train_seeds, self.batch_size, self.group_size, self.renderer_name, model,
            players, self.opponent, ("train",),
        )  # fmt: skip
        test = _Seeds(
            self.game,
            held_out,
            self.eval_games,
            1,
            self.renderer_name,
            model,
            players,
            "random",
            ("vs_random",),
        )
        return train, test

    async def scripted_episodes(self, n: int, seed: int) -> Sequence[tuple[Env, TokenCompleter]]:
        """``n`` games the bisecting player plays (``training.SupportsScriptedEpisodes``), on
        seeds apart from the train and held-out ones; in a multi-player game, random moves on
        seat 0 against random players."""
        players = await self._players()
        if players > 1:
            return await anyio.to_thread.run_sync(self._random_episodes, n, seed, players)
        episodes: list[tuple[Env, TokenCompleter]] = []
        for i in range(n):
            builder = TextArenaGroup(
                self.game,
                seed=(seed + 50) * TRAIN_SEED_BASE + i,
                renderer_name=self.renderer_name,
                model_name_for_tokenizer=self.model_name_for_tokenizer,
            )
            (env,) = await builder.make_envs()
            episodes.append((env, PlayerPolicy(env, Bisector())))  # type: ignore[arg-type]
        return episodes

    def _random_episodes(self, n: int, seed: int, players: int) -> list[tuple[Env, TokenCompleter]]:
        from envs.interop._renderer import policy_renderer

        renderer = policy_renderer(self.renderer_name, self.model_name_for_tokenizer)
        episodes: list[tuple[Env, TokenCompleter]] = []
        for i in range(n):
            rng = random.Random(game_seed(seed, i))
            game = TextArenaGame(make_game(self.game), players, seed=(seed + 50) * TRAIN_SEED_BASE + i)
            others = {p: RandomMove(rng.randrange(2**31)) for p in range(1, players)}
            env = SoloSeatEnv(game, 0, renderer, others)  # type: ignore[arg-type]
            episodes.append((env, PlayerPolicy(env, RandomMove(rng.randrange(2**31)))))
        return episodes


@chz.chz
class TextArenaWarmStart(training.WarmStartConfig):
    """:class:`training.WarmStartConfig` with this recipe's defaults."""

    episodes: int = 64
    steps: int = 8
    batch_size: int = 16


@chz.chz
class TextArenaTrainConfig(training.Config):
    """:class:`training.Config` with defaults for a TextArena single-player game."""

    log_path: str = "runs/textarena/default"
    max_tokens: int = 8
    temperature: float = 1.0
    max_steps: int = 8
    learning_rate: float = 5e-4
    eval_every: int = 8
    eval_temperature: float = 0.0
    warm_start: TextArenaWarmStart = chz.field(default_factory=TextArenaWarmStart)

    game: str = "GuessTheNumber-v0"
    """The TextArena id (``textarena:`` prefix optional)."""
    batch_size: int = 4
    """Groups per training step."""
    group_size: int = 8
    """Episodes per group (one seed)."""
    eval_games: int = 32
    """Held-out games (seeds ``eval_seed`` ...)."""
    eval_seed: int = 0
    opponent: str = "self"
    """Multi-player games: who holds the other seats in training, ``self`` (self-play, every
    seat trains) or ``random`` (the policy on seat 0)."""

    def dataset_builder(self) -> TextArenaDatasetBuilder:
        return TextArenaDatasetBuilder(
            game=self.game.removeprefix("textarena:"),
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=max(1, self.max_steps),
            eval_games=self.eval_games,
            eval_seed=self.eval_seed,
            seed=self.seed,
            renderer_name=self.renderer_name,
            model_name_for_tokenizer=self.model_name,
            opponent=self.opponent,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(TextArenaTrainConfig, argv, prog="envs.interop.textarena_train")


if __name__ == "__main__":
    raise SystemExit(main())
