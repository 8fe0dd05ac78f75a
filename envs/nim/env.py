"""Nim (one pile, the subtraction game) as a two-seat :class:`envs.seats.Game`.

Seat 0 moves first. Each seat is told how many stones are left (and what the other seat took)
and answers with how many it takes (the first digit of its message); whoever takes the last
stone wins. An illegal move or a faulty action ends the game for both seats
(:class:`~envs.nim.config.NimConfig` says what each gets). Every game ends with ``nim/win`` or
``nim/loss`` set to 1 for each seat (``nim/illegal`` too for the seat whose illegal move ended
it), which the win/loss tables count. There are no draws.

With best play a pile that is a multiple of ``max_take + 1`` is lost for the player to move:
take ``pile % (max_take + 1)`` stones otherwise (:func:`best_takes`).
"""

from __future__ import annotations

import random
import re
from enum import StrEnum

from tinker_cookbook.renderers import Message, get_text_content

from envs.nim.config import NimConfig
from envs.seats import STOP_SEAT_FAULT, Game, Move


class Metric(StrEnum):
    """Per-seat game metrics (one-hot at the end of a game)."""

    WIN = "nim/win"
    LOSS = "nim/loss"
    ILLEGAL = "nim/illegal"
    """This seat's illegal move (or faulty action) ended the game (also counted as a loss)."""


def result_metrics(won: bool, *, illegal: bool = False) -> dict[str, float]:
    """Every result key, one of win / loss 1 (means over trajectories are then rates)."""
    return {
        str(Metric.WIN): float(won),
        str(Metric.LOSS): float(not won),
        str(Metric.ILLEGAL): float(illegal),
    }


def legal_takes(pile: int, max_take: int) -> list[int]:
    """The legal moves: 1 to ``min(max_take, pile)``."""
    return list(range(1, min(max_take, pile) + 1))


def best_takes(pile: int, max_take: int) -> list[int]:
    """The winning moves (empty when every move loses against best play)."""
    r = pile % (max_take + 1)
    return [r] if r else []


def position_message(pile: int, max_take: int, last: int | None = None) -> str:
    """What the seat to move is told: the other seat's move and the stones left."""
    head = f"Opponent took {last}. " if last else ""
    top = min(max_take, pile)
    return f"{head}Stones left: {pile}. Take {'1' if top == 1 else f'1 to {top}'}."


_PILE = re.compile(r"Stones left: (\d+)\.")


def parse_pile(text: str) -> int | None:
    """The last pile told in ``text`` (:func:`position_message`), or None."""
    found = _PILE.findall(text)
    return int(found[-1]) if found else None


def parse_move(text: str) -> int | None:
    """How many stones a message takes: its first digit (None when it has none)."""
    m = re.search(r"\d", text)
    return int(m.group()) if m else None


class NimGame(Game):
    """One game (see the module docstring); ``pile`` stones at the start."""

    roles = ("first", "second")
    first_seat = 0

    def __init__(self, config: NimConfig | None = None, pile: int | None = None):
        self.config = config or NimConfig()
        self.pile = self.config.pile_max if pile is None else pile
        if self.pile < 1:
            raise ValueError(f"a game needs at least one stone, got {self.pile}")
        self.moves: list[int] = []
        """Stones taken so far, in order."""

    @classmethod
    def drawn(cls, config: NimConfig, rng: random.Random) -> NimGame:
        """A game whose pile is drawn from ``config.pile_min..pile_max``."""
        return cls(config, rng.randint(config.pile_min, config.pile_max))

    def initial_messages(self, seat: int) -> list[Message]:
        c = self.config
        text = c.prompt.format(max_take=c.max_take)
        if seat == self.first_seat:
            text = f"{text}\n{position_message(self.pile, c.max_take)}"
        return [{"role": "user", "content": text}]

    def forfeit(self, seat: int, reason: str) -> Move:
        """Seat ``seat`` moved illegally (``reason``) or its action was faulty: the game ends."""
        c = self.config
        return Move(
            rewards={seat: c.illegal_reward, 1 - seat: c.opponent_illegal_reward},
            done=True,
            metrics={seat: result_metrics(False, illegal=True), 1 - seat: result_metrics(True)},
            logs={"illegal": reason},
            stop_reason=STOP_SEAT_FAULT,
        )

    async def on_move(self, seat: int, message: Message) -> Move:
        take = parse_move(get_text_content(message))
        c = self.config
        if take is None or take not in legal_takes(self.pile, c.max_take):
            return self.forfeit(seat, "no number" if take is None else f"took {take} of {self.pile}")
        self.pile -= take
        self.moves.append(take)
        other = 1 - seat
        if self.pile == 0:
            return Move(
                rewards={seat: c.win_reward, other: c.loss_reward},
                done=True,
                metrics={seat: result_metrics(True), other: result_metrics(False)},
            )
        told: Message = {"role": "user", "content": position_message(self.pile, c.max_take, take)}
        return Move(messages={other: [told]}, next_seat=other, logs={"move": take})
