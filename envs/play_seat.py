"""Take a seat yourself: ``python -m envs.play <game> [--seat N] [--opponent NAME] [--games K]``.

``envs.play`` hands a multi-seat game's name (:data:`GAMES`) to :func:`main` here.

A person plays one seat of a multi-seat game in the terminal (what the seat is told is printed; a
line typed is its move) against a scripted player, the base model, or a checkpoint::

    python -m envs.play tictactoe                          # you are X against the base model
    python -m envs.play tictactoe --seat 1 --opponent optimal
    python -m envs.play nim --opponent random                # Nim: how many stones you take
    python -m envs.play tictactoe --opponent runs/tictactoe/default   # the run's final checkpoint
    python -m envs.play tictactoe --opponent local://<model_id>/sampler_weights/<name> --root <run>/checkpoints

It runs the same game loop as training (``envs.seats``), so a model seat sees exactly the tokens it
would see there. Input also comes from a pipe (``printf '5\\n1\\n' | python -m envs.play ...``);
when the input ends, the game ends (``seat_error``). Games are registered in :data:`GAMES`.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TextIO

import anyio
from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.seats import Game, GameRecord, Player, Seat, SeatedGroupBuilder


@dataclass(frozen=True)
class PlayableGame:
    """What ``envs.play`` needs of a game."""

    make_game: Callable[[random.Random], Game]
    scripted: Callable[[str, random.Random], MessageCompleter]
    """A scripted opponent by name (raises ``ValueError`` for an unknown name)."""
    scripted_names: tuple[str, ...]
    max_tokens: int = 8
    """Sampling budget of a model seat."""


def _tictactoe() -> PlayableGame:
    from envs.tictactoe.builders import OPPONENTS, make_opponent
    from envs.tictactoe.env import TicTacToeGame

    return PlayableGame(lambda rng: TicTacToeGame(), make_opponent, OPPONENTS, max_tokens=6)


def _nim() -> PlayableGame:
    from envs.nim.builders import OPPONENTS, make_opponent
    from envs.nim.config import NimConfig
    from envs.nim.env import NimGame

    return PlayableGame(partial(NimGame.drawn, NimConfig()), make_opponent, OPPONENTS, max_tokens=4)


GAMES: dict[str, Callable[[], PlayableGame]] = {"tictactoe": _tictactoe, "nim": _nim}
"""Playable games by name (a factory each, imported on use)."""


class HumanPlayer(MessageCompleter):
    """A person at a terminal: prints what the seat was told since its last move, reads one line."""

    def __init__(self, read: Callable[[], str], write: TextIO) -> None:
        self.read = read
        self.write = write
        self.seen = 0

    async def __call__(self, messages: list[Message]) -> Message:
        for m in messages[self.seen :]:
            if m["role"] != "assistant":
                print(f"\n{get_text_content(m)}", file=self.write)
        self.seen = len(messages) + 1
        print("> ", end="", file=self.write, flush=True)
        line = await anyio.to_thread.run_sync(self.read)
        if not line:
            raise EOFError("no more input")
        return {"role": "assistant", "content": line.strip()}


def _read_line(stream: TextIO) -> Callable[[], str]:
    return stream.readline


async def model_player(
    opponent: str, model: str, root: Path | None, max_tokens: int, temperature: float
) -> Player:
    """The base model (``base``), a run folder's final checkpoint, or a sampler path, as a seat
    (:func:`envs.seats.model_player` on the local backend, the same player a two-seat game's
    ``train_opponents=base`` or ``checkpoint:<path>`` pins)."""
    from envs.seats import BASE, CHECKPOINT
    from envs.seats import model_player as load

    name = opponent if opponent == BASE else CHECKPOINT + opponent
    try:
        return await load(name, model=model, root=root, max_tokens=max_tokens, temperature=temperature)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


def describe(record: GameRecord, seat: int) -> str:
    """One line: the result for the person's seat."""
    mine = record.seats[seat]
    results = [
        k.rsplit("/", 1)[-1]
        for k, v in mine.metrics.items()
        if v == 1.0 and k.endswith(("/win", "/draw", "/loss"))
    ]
    result = results[0] if results else ("error" if not record.ok else f"reward {mine.reward:+.2f}")
    why = f" ({record.error.error_type}: {record.error.error_message})" if record.error else ""
    return f"game over: {result}; stop: {record.stop_reason}{why}; moves: {record.moves}"


async def play(
    name: str,
    *,
    seat: int,
    opponent: str,
    games: int,
    seed: int,
    model: str,
    root: Path | None,
    temperature: float,
    stdin: TextIO,
    stdout: TextIO,
) -> list[GameRecord]:
    """Play ``games`` games with a person on ``seat``; return their records."""
    spec = GAMES[name]()
    renderer_model = model
    if opponent in spec.scripted_names:
        other = Seat.pinned(opponent, partial(spec.scripted, opponent))
    else:
        other = Seat.pinned(opponent, await model_player(opponent, model, root, spec.max_tokens, temperature))
    from renderers_ext import load_renderer

    renderer = load_renderer(None, renderer_model)
    human = Seat.pinned("you", HumanPlayer(_read_line(stdin), stdout))
    n = len(spec.make_game(random.Random(0)).roles)
    if not 0 <= seat < n:
        raise SystemExit(f"error: --seat must be 0..{n - 1}")
    records = []
    for g in range(games):
        seats = tuple(human if i == seat else other for i in range(n))
        builder = SeatedGroupBuilder(
            make_game=spec.make_game, renderer=renderer, seats=seats, games=1, seed=seed + g
        )
        assert isinstance(human.player, HumanPlayer)
        human.player.seen = 0
        record = await builder.play_one(0, None)
        print(f"\n{describe(record, seat)}", file=stdout, flush=True)
        records.append(record)
        if not record.ok:
            break
    return records


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and play; exit status 0 unless the arguments are wrong."""
    from backend.model import SMOLLM2

    parser = argparse.ArgumentParser(
        prog="python -m envs.play", description="Take a seat in a multi-seat game."
    )
    parser.add_argument("game", choices=sorted(GAMES))
    parser.add_argument("--seat", type=int, default=0, help="your seat (0 moves first)")
    parser.add_argument(
        "--opponent",
        default="base",
        help="a scripted player (random, optimal), 'base' (the base model), a run folder or a sampler path",
    )
    parser.add_argument("--games", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=SMOLLM2, help="the model (base, and its tokenizer)")
    parser.add_argument("--root", type=Path, default=None, help="checkpoint root of a local:// sampler path")
    parser.add_argument("--temperature", type=float, default=0.0)
    ns = parser.parse_args(argv)
    from backend.model import register_tokenizers

    register_tokenizers()
    anyio.run(
        lambda: play(
            ns.game,
            seat=ns.seat,
            opponent=ns.opponent,
            games=ns.games,
            seed=ns.seed,
            model=ns.model,
            root=ns.root,
            temperature=ns.temperature,
            stdin=sys.stdin,
            stdout=sys.stdout,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
