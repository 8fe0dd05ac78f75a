"""Scripted tic-tac-toe players (message-level, so they play any seat and read only what that
seat is told): :class:`RandomPlayer`, :class:`OptimalPlayer` (minimax, random among the best)."""

from __future__ import annotations

import random

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.tictactoe.env import MARKS, Board, free_cells, move_values, parse_board


def _position(messages: list[Message]) -> tuple[Board, str]:
    """The board the last user message shows, and the mark to move (X when the counts are equal)."""
    for message in reversed(messages):
        if message["role"] == "user":
            board = parse_board(get_text_content(message))
            if board is not None:
                x, o = board.count("X"), board.count("O")
                return board, MARKS[0] if x == o else MARKS[1]
    raise ValueError("no board in the conversation")


def _say(cell: int) -> Message:
    return {"role": "assistant", "content": str(cell)}


class RandomPlayer(MessageCompleter):
    """A uniformly random free cell."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    async def __call__(self, messages: list[Message]) -> Message:
        board, _ = _position(messages)
        return _say(self.rng.choice(free_cells(board)))


class OptimalPlayer(MessageCompleter):
    """Minimax: a best cell, drawn uniformly among the best (``noise``: a random cell instead, that
    often). Never loses with ``noise=0``."""

    def __init__(self, seed: int = 0, noise: float = 0.0):
        self.rng = random.Random(seed)
        self.noise = noise

    async def __call__(self, messages: list[Message]) -> Message:
        board, mark = _position(messages)
        if self.noise and self.rng.random() < self.noise:
            return _say(self.rng.choice(free_cells(board)))
        values = move_values(board, mark)
        best = max(v for _, v in values)
        return _say(self.rng.choice([c for c, v in values if v == best]))
