"""Tic-tac-toe as a two-seat :class:`envs.seats.Game`: the board, the rules, the messages.

Seat 0 is X and moves first, seat 1 is O. Each seat is told the board and the free cells after
every move of the other seat and answers with a cell number (the first digit 1-9 of its
message). An illegal move (a taken cell, no digit) or a faulty action ends the game for both
seats (:class:`~envs.tictactoe.config.TicTacToeConfig` says what each gets). Every game ends with
one of ``tictactoe/win``, ``/draw``, ``/loss`` set to 1 for each seat (``/illegal`` too for a
seat whose illegal move ended it), which the win/draw/loss tables count.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cache

from tinker_cookbook.renderers import Message, get_text_content

from envs.seats import STOP_SEAT_FAULT, Game, Move
from envs.tictactoe.config import TicTacToeConfig

MARKS = ("X", "O")
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
Board = tuple[str, ...]
"""Nine cells, each ``"X"``, ``"O"`` or ``""``."""
EMPTY: Board = ("",) * 9


class Metric(StrEnum):
    """Per-seat game metrics (one-hot at the end of a game)."""

    WIN = "tictactoe/win"
    DRAW = "tictactoe/draw"
    LOSS = "tictactoe/loss"
    ILLEGAL = "tictactoe/illegal"
    """This seat's illegal move (or faulty action) ended the game (also counted as a loss)."""


def result_metrics(result: Metric, *, illegal: bool = False) -> dict[str, float]:
    """Every result key, one of them 1 (means over trajectories are then rates: the cookbook's
    ``dict_mean`` averages a key over the dicts that have it)."""
    out = {str(m): 0.0 for m in Metric}
    out[str(result)] = 1.0
    out[str(Metric.ILLEGAL)] = float(illegal)
    return out


def winner(board: Board) -> str | None:
    """``"X"`` or ``"O"`` when a line is complete, else None."""
    for a, b, c in LINES:
        if board[a] and board[a] == board[b] == board[c]:
            return board[a]
    return None


def free_cells(board: Board) -> list[int]:
    """Free cells, numbered 1 to 9."""
    return [i + 1 for i, c in enumerate(board) if not c]


def render_board(board: Board) -> str:
    """Three rows ``X | 2 | O``: a mark, or the number of a free cell."""
    cells = [c or str(i + 1) for i, c in enumerate(board)]
    return "\n".join(" | ".join(cells[r * 3 : r * 3 + 3]) for r in range(3))


_ROW = re.compile(r"^\s*([XO1-9]) \| ([XO1-9]) \| ([XO1-9])\s*$", re.MULTILINE)


def parse_board(text: str) -> Board | None:
    """The last board rendered in ``text`` (:func:`render_board`), or None."""
    rows = _ROW.findall(text)
    if len(rows) < 3:
        return None
    cells = [c for row in rows[-3:] for c in row]
    return tuple(c if c in MARKS else "" for c in cells)


def parse_move(text: str) -> int | None:
    """The cell a message names: its first digit 1-9 (None when it has none)."""
    m = re.search(r"[1-9]", text)
    return int(m.group()) if m else None


def position_message(board: Board, last: tuple[str, int] | None = None) -> str:
    """What the seat to move is told: the other seat's move, the board, the free cells."""
    head = f"{last[0]} played {last[1]}.\n" if last else ""
    free = " ".join(map(str, free_cells(board)))
    return f"{head}{render_board(board)}\nFree cells: {free}. Your move."


@cache
def move_values(board: Board, mark: str) -> tuple[tuple[int, int], ...]:
    """``(cell, value)`` of every free cell for ``mark`` to move: +1 a forced win, 0 a draw, -1 a
    forced loss under best play (plain minimax; the whole game has under 6,000 positions)."""
    other = "O" if mark == "X" else "X"
    out = []
    for cell in free_cells(board):
        nxt = (*board[: cell - 1], mark, *board[cell:])
        if winner(nxt) == mark:
            value = 1
        elif not free_cells(nxt):
            value = 0
        else:
            value = -max(v for _, v in move_values(nxt, other))
        out.append((cell, value))
    return tuple(out)


class TicTacToeGame(Game):
    """One game (see the module docstring)."""

    roles = ("x", "o")
    first_seat = 0

    def __init__(self, config: TicTacToeConfig | None = None):
        self.config = config or TicTacToeConfig()
        self.board: Board = EMPTY
        self.moves: list[int] = []
        """Cells played so far, in order."""

    def initial_messages(self, seat: int) -> list[Message]:
        text = self.config.prompt.format(mark=MARKS[seat])
        if seat == self.first_seat:
            text = f"{text}\n\n{position_message(self.board)}"
        return [{"role": "user", "content": text}]

    def _end(self, result: dict[int, Metric], rewards: dict[int, float], stop: str = "completed") -> Move:
        return Move(
            rewards=rewards,
            done=True,
            metrics={s: result_metrics(m) for s, m in result.items()},
            stop_reason=stop,
        )

    def forfeit(self, seat: int, reason: str) -> Move:
        """Seat ``seat`` moved illegally (``reason``) or its action was faulty: the game ends."""
        c = self.config
        return Move(
            rewards={seat: c.illegal_reward, 1 - seat: c.opponent_illegal_reward},
            done=True,
            metrics={seat: result_metrics(Metric.LOSS, illegal=True), 1 - seat: result_metrics(Metric.WIN)},
            logs={"illegal": reason},
            stop_reason=STOP_SEAT_FAULT,
        )

    async def on_move(self, seat: int, message: Message) -> Move:
        text = get_text_content(message)
        cell = parse_move(text)
        if cell is None or self.board[cell - 1]:
            return self.forfeit(seat, "no cell" if cell is None else f"cell {cell} is taken")
        mark = MARKS[seat]
        self.board = (*self.board[: cell - 1], mark, *self.board[cell:])
        self.moves.append(cell)
        c = self.config
        other = 1 - seat
        if winner(self.board) == mark:
            return self._end(
                {seat: Metric.WIN, other: Metric.LOSS}, {seat: c.win_reward, other: c.loss_reward}
            )
        if not free_cells(self.board):
            return self._end(
                {seat: Metric.DRAW, other: Metric.DRAW}, {seat: c.draw_reward, other: c.draw_reward}
            )
        told: Message = {"role": "user", "content": position_message(self.board, (mark, cell))}
        return Move(messages={other: [told]}, next_seat=other, logs={"move": f"{mark}{cell}"})
