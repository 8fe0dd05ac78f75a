"""Scripted Nim players (message-level, so they play any seat and read only what that seat is
told): :class:`RandomPlayer`, :class:`OptimalPlayer` (a winning move when there is one)."""

from __future__ import annotations

import random

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.nim.env import best_takes, legal_takes, parse_pile


def _pile(messages: list[Message]) -> int:
    """The pile the last user message that tells one shows."""
    for message in reversed(messages):
        if message["role"] == "user":
            pile = parse_pile(get_text_content(message))
            if pile is not None:
                return pile
    raise ValueError("no pile in the conversation")


def _say(take: int) -> Message:
    return {"role": "assistant", "content": str(take)}


class RandomPlayer(MessageCompleter):
    """A uniformly random legal move."""

    def __init__(self, seed: int = 0, max_take: int = 3):
        self.rng = random.Random(seed)
        self.max_take = max_take

    async def __call__(self, messages: list[Message]) -> Message:
        return _say(self.rng.choice(legal_takes(_pile(messages), self.max_take)))


class OptimalPlayer(RandomPlayer):
    """Leaves a multiple of ``max_take + 1`` when it can, else a random legal move (``noise``: a
    random legal move instead, that often). Never loses from a winning pile with ``noise=0``."""

    def __init__(self, seed: int = 0, max_take: int = 3, noise: float = 0.0):
        super().__init__(seed, max_take)
        self.noise = noise

    async def __call__(self, messages: list[Message]) -> Message:
        pile = _pile(messages)
        best = best_takes(pile, self.max_take)
        if not best or (self.noise and self.rng.random() < self.noise):
            best = legal_takes(pile, self.max_take)
        return _say(self.rng.choice(best))
