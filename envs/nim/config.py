"""The rules and rewards of a Nim game: :class:`NimConfig` (chz, cheap to import)."""

from __future__ import annotations

import chz

PROMPT = (
    "Let's play Nim. There is one pile of stones. We take turns; on your turn you take 1 to "
    "{max_take} stones. Whoever takes the last stone wins. Answer with how many stones you take, nothing else."
)
"""Each seat's opening (``{max_take}``); the pile follows it."""


@chz.chz
class NimConfig:
    """One pile of ``pile_min`` to ``pile_max`` stones (drawn per game); each move takes 1 to
    ``max_take``; whoever takes the last stone wins (frozen, picklable). Seat 0 moves first.

    A move is the first digit of the seat's message; a number outside 1..min(``max_take``, pile),
    a message with no digit, or a faulty action (truncated, unparseable) is illegal and ends the
    game: the mover gets ``illegal_reward``, the other seat ``opponent_illegal_reward`` (0: a
    blunder of the other seat earns nothing in self-play, where both seats are the same policy).
    """

    pile_min: int = 5
    pile_max: int = 12
    max_take: int = 3
    win_reward: float = 1.0
    loss_reward: float = -1.0
    illegal_reward: float = -1.0
    """The mover's reward for an illegal move (it ends the game)."""
    opponent_illegal_reward: float = 0.0
    """The other seat's reward when the mover's illegal move ends the game."""
    prompt: str = PROMPT

    @chz.validate
    def _check(self) -> None:
        if not 1 <= self.pile_min <= self.pile_max:
            raise ValueError(f"need 1 <= pile_min <= pile_max, got {self.pile_min}, {self.pile_max}")
        if not 1 <= self.max_take <= 9:
            raise ValueError(f"max_take must be 1 to 9 (a one-digit move), got {self.max_take}")
        if self.loss_reward > self.win_reward:
            raise ValueError("rewards must satisfy loss_reward <= win_reward")
        try:
            self.prompt.format(max_take=3)
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"prompt template must use only {{max_take}}: {e}") from None
