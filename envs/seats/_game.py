"""The multi-seat form: a :class:`Game` with N seats answers each move with a frozen :class:`Move`;
each seat sees the game through its own token-level :class:`SeatEnv`.

A game is as small as a :class:`~envs.core.ChatEnv` game: :meth:`Game.initial_messages` (per
seat) and :meth:`Game.on_move` (given the seat and its parsed message, return a :class:`Move`:
new messages for any seat, rewards per seat, whose turn is next, whether the game ends). The
rules never see tokens.

A :class:`SeatEnv` is a ``ChatEnv`` whose step is *deferred*: the game loop
(:func:`envs.seats.play_game`) applies a seat's move to the game at once, but steps the seat's
env only when that seat is to move again (or when the game ends), with the messages the other
seats' moves produced for it in between (its first observation is built at its first turn, so
the opening moves of the seats before it are in its prompt). So a seat's observations are its previous observation +
its exact action tokens + the rendering of what happened since: the extension property holds
per seat, and no seat ever waits for another inside ``env.step``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tinker_cookbook.completers import StopCondition
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.rl.types import InitialObservationOverflow, Metrics, Observation, StopReason

from envs.core import ChatEnv, EnvLimits, Reply

STOP_SEAT_FAULT = "seat_fault"
"""Game stop reason: a seat's action was faulty (truncated, unparseable, empty); it forfeits."""
STOP_SEAT_LIMIT = "seat_limit"
"""Game stop reason: a seat's own budget (turns, context) ran out; the game ends as it stands."""
STOP_MAX_MOVES = "max_moves"
"""Game stop reason: the loop's move budget ran out; the game ends as it stands."""
STOP_SEAT_ERROR = "seat_error"
"""Game stop reason: a seat's player raised, or the game itself did (the game is not trained)."""
STOP_SEAT_TIMEOUT = "seat_timeout"
"""Game stop reason: a seat's player or step exceeded its deadline (the game is not trained)."""


@dataclass(frozen=True)
class Move:
    """The game's answer to one seat's move (or to a forfeit)."""

    messages: Mapping[int, Sequence[Message]] = field(default_factory=dict)
    """New messages per seat index (what that seat is told; rendered after its own next action)."""
    rewards: Mapping[int, float] = field(default_factory=dict)
    """Reward per seat index earned by this move (summed into each seat's game reward)."""
    done: bool = False
    """Whether the game ends here."""
    next_seat: int | None = None
    """Whose turn it is next (required unless ``done``)."""
    metrics: Mapping[int, Metrics] = field(default_factory=dict)
    """Numeric metrics per seat (summed over the game; e.g. the result one-hot at the end)."""
    logs: dict[str, str | int | float] = field(default_factory=dict)
    """Diagnostics of this move for the game record (not aggregated)."""
    stop_reason: str = StopReason.COMPLETED
    """Why the game ends, when ``done``."""


class Game(ABC):
    """The rules of one game with ``len(roles)`` seats. Subclass and write two methods.

    Seats are indexed ``0..n-1``; :attr:`roles` names them (``("x", "o")``, ``("first",
    "second")``...): advantages are centred per role, and logs, tags and tables use the names.
    """

    roles: tuple[str, ...] = ("first", "second")
    """The seats' role names, in seat order."""
    first_seat: int = 0
    """Who moves first."""

    @abstractmethod
    def initial_messages(self, seat: int) -> list[Message]:
        """Seat ``seat``'s conversation before its first turn."""

    @abstractmethod
    async def on_move(self, seat: int, message: Message) -> Move:
        """Apply seat ``seat``'s parsed move; say what each seat is told and who is next."""

    def forfeit(self, seat: int, reason: str) -> Move:
        """The game's end when seat ``seat`` cannot move (``reason``: a fault name, or a budget).

        Default: the game ends, that seat gets ``-1``, the others ``0``. Override for a game's own
        scoring (e.g. the others win)."""
        return Move(rewards={seat: -1.0}, done=True, stop_reason=STOP_SEAT_FAULT)


class SeatEnv(ChatEnv):
    """Seat ``seat`` of ``game`` as a token-level env (driven by the game loop; see the module
    docstring). Faults end the seat's episode (the loop forfeits the game for every seat).

    The loop calls :meth:`tell` with the messages other seats' moves produced, then steps the env
    with the seat's previous action once the seat is to move again (or :meth:`finish` first,
    when the game is over).
    """

    def __init__(self, game: Game, seat: int, renderer: Renderer, *, limits: EnvLimits | None = None):
        super().__init__(renderer, limits=limits or EnvLimits(max_turns=10**6))
        self.game = game
        self.seat = seat
        self._pending: list[Message] = []
        self._done = False
        self._stop_reason: str = StopReason.COMPLETED
        self.in_loop = False
        """Set by the game loop that drives this seat; a seat env stepped alone (by an engine or a
        checker) refuses to start, since no other seat would ever move."""

    @property
    def role(self) -> str:
        """The seat's role name."""
        return self.game.roles[self.seat]

    def tell(self, messages: Sequence[Message]) -> None:
        """Queue messages for this seat (rendered after its next action)."""
        self._pending.extend(messages)

    def finish(self, stop_reason: str) -> None:
        """The game is over: the next step ends this seat's episode with ``stop_reason``."""
        self._done = True
        self._stop_reason = stop_reason

    async def initial_observation(self) -> tuple[Observation, StopCondition] | InitialObservationOverflow:
        if not self.in_loop:
            raise RuntimeError(
                f"seat {self.seat} of {type(self.game).__name__} is played by the game loop "
                "(envs.seats.play_game / SeatedGroupBuilder.play), not stepped alone"
            )
        return await super().initial_observation()

    def initial_messages(self) -> list[Message]:
        """The game's opening for this seat, then whatever it was told before its first turn
        (the loop builds a seat's first observation when that seat first moves)."""
        told, self._pending = self._pending, []
        return [*self.game.initial_messages(self.seat), *told]

    async def on_message(self, message: Message) -> Reply:
        pending, self._pending = self._pending, []
        if not self._done:
            return Reply(messages=pending)
        # the trajectory's stop reason is the game's (set by the loop); the env's own is COMPLETED
        return Reply(done=True, logs={"game_stop": self._stop_reason})
