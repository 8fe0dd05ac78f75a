"""Who plays each seat: :class:`Seat` (the policy being trained, a pinned opponent, a partner, or
a pool drawn per game).

A player is either token-level (a ``TokenCompleter``: a sampler of the base model, of a frozen
checkpoint, of anything) or message-level (a ``MessageCompleter``: a scripted, random or
rule-based optimal player), bridged to tokens through :class:`envs.PlayerPolicy` on the seat's own
env, so every seat's history is tokens either way. Only seats played by the policy can train;
every other seat acts and is logged, never trained.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tinker_cookbook.completers import MessageCompleter, TokenCompleter

from envs.core import ChatEnv
from envs.player import PlayerPolicy

Player = TokenCompleter | MessageCompleter
"""A seat's player: token-level, or message-level (bridged to the seat's tokens)."""
PlayerFactory = Callable[[random.Random], Player]
"""Makes a fresh player for one game from the game's seeded RNG (e.g. a random player seeded per
game, so concurrent games never share its draws and a seed replays every game)."""

POLICY = "policy"
"""Name of the seat player that is the policy the loop trains (or evaluates)."""


@dataclass(frozen=True)
class Seat:
    """Who plays one seat of a game. Build with :meth:`policy`, :meth:`pinned`, :meth:`partner`
    or :meth:`pool`."""

    name: str = POLICY
    """The player's name in logs, tags and win/draw/loss tables (``policy`` for the policy)."""
    player: Player | PlayerFactory | None = None
    """The pinned player (or a factory making one per game); None: the policy the loop passes in."""
    train: bool = True
    """Whether this seat's trajectories train (the policy's seats only)."""
    choices: tuple[Seat, ...] = ()
    """A pool: one of these is drawn per game (``weights`` apply); the other fields are unused."""
    weights: tuple[float, ...] = ()
    """Draw weights of ``choices`` (empty: uniform)."""

    def __post_init__(self) -> None:
        if self.player is not None and self.train:
            raise ValueError(f"seat {self.name!r}: a pinned player never trains (train=False)")
        if self.weights and len(self.weights) != len(self.choices):
            raise ValueError(
                f"seat pool {self.name!r}: {len(self.weights)} weights for {len(self.choices)} choices"
            )
        if any(c.choices for c in self.choices):
            raise ValueError(f"seat pool {self.name!r}: pools do not nest")
        if self.player is None and self.name != POLICY and not self.choices:
            raise ValueError(f"seat {self.name!r} has no player: use Seat.policy() or give a player")

    @classmethod
    def policy(cls, *, train: bool = True) -> Seat:
        """The policy being trained (self-play when it holds several seats); ``train=False``:
        it plays this seat but the seat's trajectories are not trained."""
        return cls(POLICY, None, train)

    @classmethod
    def pinned(cls, name: str, player: Player | PlayerFactory) -> Seat:
        """A fixed opponent (random, scripted, rule-based optimal, the base model, a frozen
        checkpoint): acts, is logged, never trains."""
        return cls(name, player, False)

    @classmethod
    def partner(cls, name: str, player: Player | PlayerFactory) -> Seat:
        """A partner agent (judge, simulated user, answerer): acts, is logged, never trains.
        The same as :meth:`pinned`; the name says the role."""
        return cls(name, player, False)

    @classmethod
    def pool(cls, name: str, seats: Sequence[Seat], weights: Sequence[float] = ()) -> Seat:
        """One of ``seats`` drawn per game (e.g. past checkpoints and a random player)."""
        if not seats:
            raise ValueError(f"seat pool {name!r} is empty")
        return cls(name, None, False, tuple(seats), tuple(weights))

    @property
    def is_policy(self) -> bool:
        """Whether the policy plays this seat."""
        return self.player is None and not self.choices

    @property
    def trains(self) -> bool:
        """Whether this seat's trajectories become datums."""
        return self.is_policy and self.train

    def draw(self, rng: random.Random) -> Seat:
        """The seat for one game: for a pool the seat drawn, and a factory's player made."""
        seat = self
        if self.choices:
            seat = (
                rng.choices(self.choices, weights=self.weights, k=1)[0]
                if self.weights
                else rng.choice(self.choices)
            )
        player = seat.player
        if player is not None and not isinstance(player, TokenCompleter | MessageCompleter):
            seat = replace(seat, player=player(rng))
        return seat


def seat_policy(seat: Seat, env: ChatEnv, policy: TokenCompleter | None) -> TokenCompleter:
    """The token-level policy that plays ``seat`` on ``env`` (``policy`` for the policy's seats)."""
    if seat.choices:
        raise ValueError(f"seat pool {seat.name!r}: draw a seat first")
    if seat.player is None:
        if policy is None:
            raise ValueError("a seat is played by the policy but no policy was given")
        return policy
    if isinstance(seat.player, TokenCompleter):
        return seat.player
    if isinstance(seat.player, MessageCompleter):
        return PlayerPolicy(env, seat.player)
    raise ValueError(f"seat {seat.name!r}: a player factory must be drawn first (Seat.draw)")
