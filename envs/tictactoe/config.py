"""The rules and rewards of a tic-tac-toe game: :class:`TicTacToeConfig` (chz, cheap to import)."""

from __future__ import annotations

import chz

PROMPT = (
    "Let's play tic-tac-toe. You are {mark}. Cells are numbered 1 to 9. "
    "On your turn, answer with the number of one free cell, nothing else."
)
"""Each seat's opening (``{mark}``: X or O); the board follows it."""


@chz.chz
class TicTacToeConfig:
    """Rewards of one game (frozen, picklable). X moves first.

    A move is the first digit 1-9 of the seat's message; a move on a taken cell, a message with no
    digit, or a faulty action (truncated, unparseable) is illegal and ends the game: the mover gets
    ``illegal_reward``, the other seat ``opponent_illegal_reward`` (0: a blunder of the other seat
    earns nothing in self-play, where both seats are the same policy).
    """

    win_reward: float = 1.0
    draw_reward: float = 0.0
    loss_reward: float = -1.0
    illegal_reward: float = -1.0
    """The mover's reward for an illegal move (it ends the game)."""
    opponent_illegal_reward: float = 0.0
    """The other seat's reward when the mover's illegal move ends the game."""
    prompt: str = PROMPT

    @chz.validate
    def _check(self) -> None:
        if not self.loss_reward <= self.draw_reward <= self.win_reward:
            raise ValueError("rewards must satisfy loss_reward <= draw_reward <= win_reward")
        try:
            self.prompt.format(mark="X")
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"prompt template must use only {{mark}}: {e}") from None
