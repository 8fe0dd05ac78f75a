"""The game loop: one task drives every seat of one game, so no seat ever waits for another.

Whose turn -> bring that seat's token history up to date (step its :class:`SeatEnv` with its
previous action: the other seats' moves since then enter as messages) -> sample that seat's
player on that history -> apply the move to the game -> next. Waiting for the other seats
therefore happens here, between calls, never inside ``env.step`` (no step slot held, no step
deadline spent on it), and a game cannot deadlock: there is nothing to wait *for* but the one
call in flight.

Each seat's trajectory is checked and accounted by the engine's own
:class:`rollout.ExtensionTracker` (every observation must extend the previous one + the
action), so a seat's datums are exactly what the cookbook's ``trajectory_to_data`` makes.

Ends: the game says so (:class:`Move` ``done``); a seat's action is faulty (truncated, unparseable:
:meth:`Game.forfeit`, the game still trains); a seat's own budget runs out, or the loop's
``max_moves`` (the game ends as it stands); a player or the game raises, or a call exceeds its
deadline (the game ends for every seat with :data:`STOP_SEAT_ERROR` / :data:`STOP_SEAT_TIMEOUT`,
its :attr:`GameRecord.error` is set and it is not trained). Cancellation from outside propagates
after nothing is left running.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import anyio
import tinker
from tinker_cookbook.completers import TokenCompleter, TokensWithLogprobs
from tinker_cookbook.rl.types import (
    ActionExtra,
    InitialObservationOverflow,
    Metrics,
    RolloutError,
    Trajectory,
    Transition,
)

from envs.core import Fault, decode_action
from envs.seats._game import (
    STOP_MAX_MOVES,
    STOP_SEAT_ERROR,
    STOP_SEAT_FAULT,
    STOP_SEAT_LIMIT,
    STOP_SEAT_TIMEOUT,
    Game,
    Move,
    SeatEnv,
)
from rollout import ExtensionCheck, ExtensionTracker, TrajectoryStats, apply_compaction

T = TypeVar("T")

METRIC_ILLEGAL = "seats/illegal"
"""1.0 on a seat's game when its own move ended the game by a fault (the game's ``forfeit``)."""


@dataclass(frozen=True)
class LoopConfig:
    """Deadlines and budgets of one game."""

    call_timeout_s: float | None = None
    """Deadline of one player call (any seat); past it the game ends with :data:`STOP_SEAT_TIMEOUT`."""
    step_timeout_s: float | None = None
    """Deadline of one seat env step (or initial observation)."""
    max_moves: int = 200
    """Moves (all seats) before the game ends with :data:`STOP_MAX_MOVES`."""
    extension_check: ExtensionCheck = ExtensionCheck.FULL
    """The per-seat run-time extension check (the engine's)."""
    compaction_period: int | None = None
    """Compact every seat's history every this many of its turns (``rollout.apply_compaction``)."""

    def __post_init__(self) -> None:
        for name in ("call_timeout_s", "step_timeout_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0 or None, got {value}")
        if self.max_moves < 1:
            raise ValueError(f"max_moves must be >= 1, got {self.max_moves}")


@dataclass(frozen=True)
class SeatResult:
    """One seat of a finished game."""

    seat: int
    role: str
    """The seat's role name (``Game.roles``)."""
    player: str
    """Who played it (``Seat.name``)."""
    trains: bool
    """Whether its trajectory is trained."""
    trajectory: Trajectory
    stats: TrajectoryStats
    reward: float
    """The seat's game reward (sum of its :attr:`Move.rewards`; the env's own step rewards, e.g.
    a fault's, stay on the transitions)."""
    metrics: Metrics
    """The seat's game metrics (sum of its :attr:`Move.metrics`, plus the loop's)."""


@dataclass(frozen=True)
class GameRecord:
    """A finished (or failed) game: every seat, why it stopped, who stopped it."""

    seats: tuple[SeatResult, ...]
    stop_reason: str
    """The game's stop reason (a ``StopReason`` value or one of the ``STOP_*`` of this package)."""
    stopped_by: int | None
    """The seat whose fault, budget, error or timeout ended the game (None: the rules did)."""
    moves: int
    """Moves played (all seats)."""
    error: RolloutError | None = None
    """Set when the game failed (player or game raised, a deadline passed): not trained."""
    elapsed_s: float = 0.0
    logs: list[dict[str, str | int | float]] = field(default_factory=list)
    """Each move's logs, with the seat that made it."""

    @property
    def ok(self) -> bool:
        """Whether the game finished (its trajectories may train)."""
        return self.error is None


async def _bounded(awaitable: Awaitable[T], timeout: float | None) -> T:
    if timeout is None:
        return await awaitable
    with anyio.fail_after(timeout):
        return await awaitable


class _SeatState:
    __slots__ = ("action", "metrics", "ob", "reward", "started", "stop", "tracker", "transitions")

    def __init__(self, mode: ExtensionCheck) -> None:
        self.tracker = ExtensionTracker(mode)
        self.transitions: list[Transition] = []
        self.ob: tinker.ModelInput = tinker.ModelInput.empty()
        self.stop: object = None
        self.action: TokensWithLogprobs | None = None
        self.started = False
        self.reward = 0.0
        self.metrics: dict[str, float] = {}


def _add(into: dict[str, float], metrics: Metrics) -> None:
    for k, v in metrics.items():
        into[k] = into.get(k, 0.0) + float(v)


async def play_game(
    game: Game,
    envs: Sequence[SeatEnv],
    policies: Sequence[TokenCompleter],
    *,
    names: Sequence[str],
    trains: Sequence[bool],
    config: LoopConfig | None = None,
) -> GameRecord:
    """Play one game to its end (see the module docstring); never raises but for cancellation.

    ``envs[i]`` is seat ``i``'s env (``SeatEnv(game, i, renderer)``), ``policies[i]`` its player
    at token level (:func:`envs.seats.seat_policy`), ``names[i]`` / ``trains[i]`` what the record
    says of it.
    """
    config = config or LoopConfig()
    n = len(envs)
    if not (len(policies) == len(names) == len(trains) == n == len(game.roles)):
        raise ValueError(
            f"{len(game.roles)} roles but {n} envs, {len(policies)} policies, {len(names)} names, {len(trains)} flags"
        )
    t0 = time.monotonic()
    seats = [_SeatState(config.extension_check) for _ in range(n)]
    stop_reason: str | None = None
    stopped_by: int | None = None
    error: RolloutError | None = None
    moves = 0
    logs: list[dict[str, str | int | float]] = []
    seat = game.first_seat
    for env in envs:
        env.in_loop = True
        if config.compaction_period:
            apply_compaction(env, config.compaction_period)

    async def advance(i: int) -> bool:
        """Step seat ``i`` with its pending action; False when its episode ended there."""
        st, env = seats[i], envs[i]
        ac = st.action
        assert ac is not None
        extra: ActionExtra = {"stop_reason": ac.stop_reason}
        result = await _bounded(env.step(ac.tokens, extra=extra), config.step_timeout_s)
        st.action = None  # stepped (a step that raised leaves it to close the trajectory with)
        st.transitions.append(
            Transition(
                ob=st.ob,
                ac=ac,
                reward=result.reward,
                episode_done=result.episode_done,
                metrics=dict(result.metrics),
                logs=dict(result.logs),
            )
        )
        if result.episode_done:
            st.tracker.acted(len(ac.tokens))
            st.ob = result.next_observation
            return False
        st.tracker.step(ac.tokens, result.next_observation, len(st.transitions), env)
        st.ob, st.stop = result.next_observation, result.next_stop_condition
        return True

    def apply(move: Move, by: int) -> None:
        for i, messages in move.messages.items():
            envs[i].tell(messages)
        for i, r in move.rewards.items():
            seats[i].reward += float(r)
        for i, m in move.metrics.items():
            _add(seats[i].metrics, m)
        if move.logs:
            logs.append({"seat": by, **move.logs})

    try:
        while True:
            if not 0 <= seat < n:
                raise ValueError(f"{type(game).__name__}: next seat {seat} is not one of the {n} seats")
            st = seats[seat]
            if not st.started:  # a seat's first observation: its opening and what it was told so far
                st.started = True
                first = await _bounded(envs[seat].initial_observation(), config.step_timeout_s)
                if isinstance(first, InitialObservationOverflow):
                    stop_reason, stopped_by = STOP_SEAT_LIMIT, seat
                    break
                st.ob, st.stop = first
                st.tracker.start(st.ob)
            elif st.action is not None and not await advance(seat):
                stop_reason, stopped_by = STOP_SEAT_LIMIT, seat
                break
            if moves >= config.max_moves:
                stop_reason = STOP_MAX_MOVES
                break
            ac = await _bounded(policies[seat](st.ob, st.stop), config.call_timeout_s)  # type: ignore[arg-type]
            if ac.maybe_logprobs is not None and len(ac.maybe_logprobs) != len(ac.tokens):
                raise ValueError(
                    f"seat {seat}: {len(ac.tokens)} tokens but {len(ac.maybe_logprobs)} logprobs"
                )
            st.action = ac
            moves += 1
            message, fault = decode_action(envs[seat].renderer, ac.tokens, tool_calls=False)
            if fault in (None, Fault.MALFORMED, Fault.INVALID_UTF8) and ac.stop_reason == "length":
                fault = Fault.TRUNCATED
            if fault is not None or message is None:
                move = game.forfeit(seat, str(fault or Fault.MALFORMED))
                if not move.done:
                    raise ValueError(f"{type(game).__name__}.forfeit must end the game (done=True)")
                _add(st.metrics, {METRIC_ILLEGAL: 1.0})
                stopped_by = seat
            else:
                move = await game.on_move(seat, message)
                if not isinstance(move, Move):
                    raise TypeError(
                        f"{type(game).__name__}.on_move must return a Move, got {type(move).__name__}"
                    )
            apply(move, seat)
            if move.done and move.stop_reason == STOP_SEAT_FAULT:  # the game ruled the move illegal
                stopped_by = seat
            if move.done:
                stop_reason = str(move.stop_reason)
                break
            if move.next_seat is None:
                raise ValueError(
                    f"{type(game).__name__}.on_move: a move that does not end the game needs next_seat"
                )
            seat = move.next_seat
        # the game is over: every seat with an action still to step ends its episode there
        for seat in range(n):
            envs[seat].finish(str(stop_reason))
            if seats[seat].action is not None:
                await advance(seat)
    except anyio.get_cancelled_exc_class():
        raise
    except TimeoutError as exc:
        error = RolloutError(
            error_type="SeatTimeout", error_message=f"seat {seat}: {exc or 'deadline exceeded'}"
        )
        stop_reason, stopped_by = STOP_SEAT_TIMEOUT, seat
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        error = RolloutError(
            error_type=type(exc).__name__, error_message=f"seat {seat}: {lines[0] if lines else ''}"
        )
        stop_reason, stopped_by = STOP_SEAT_ERROR, seat
    assert stop_reason is not None
    elapsed = time.monotonic() - t0
    results = []
    for i, st in enumerate(seats):
        if st.action is not None:  # a failed game: the last action is kept, unstepped
            st.transitions.append(
                Transition(ob=st.ob, ac=st.action, reward=0.0, episode_done=True, metrics={}, logs={})
            )
            st.tracker.acted(len(st.action.tokens))
            st.action = None
            st.ob = tinker.ModelInput.empty()
        elif st.transitions and not st.transitions[-1].episode_done:  # a failed game closes every seat
            st.transitions[-1] = replace(st.transitions[-1], episode_done=True)
            st.ob = tinker.ModelInput.empty()
        st.tracker.close()
        tr = st.tracker
        metrics = dict(st.metrics)
        metrics["seats/moves"] = float(moves)
        metrics[f"seats/stop/{stop_reason}"] = 1.0
        results.append(
            SeatResult(
                seat=i,
                role=game.roles[i],
                player=names[i],
                trains=trains[i],
                trajectory=Trajectory(transitions=st.transitions, final_ob=st.ob, stop_reason=stop_reason),
                stats=TrajectoryStats(
                    turns=len(st.transitions),
                    sampled_tokens=sum(len(t.ac.tokens) for t in st.transitions),
                    breaks=tuple(tr.breaks),
                    datums=tr.datums,
                    tokens_trained=tr.tokens_trained,
                    tokens_unique=tr.tokens_unique,
                    tokens_per_turn=tr.tokens_per_turn,
                    stop_reason=stop_reason,
                    elapsed_s=elapsed,
                ),
                reward=st.reward,
                metrics=metrics,
            )
        )
    return GameRecord(
        seats=tuple(results),
        stop_reason=stop_reason,
        stopped_by=stopped_by,
        moves=moves,
        error=error,
        elapsed_s=elapsed,
        logs=logs,
    )
