"""Seats stepped one env at a time: what :meth:`SeatedGroupBuilder.make_envs` returns, so a seated
group also runs where only the cookbook's ``Env`` contract is known (the cookbook's ``rl.train``
and ``do_group_rollout``, any engine that steps each env of a group concurrently).

Each game runs :func:`envs.seats.play_game` in a task of its own (started by the first of its
envs to be asked for an observation); the game's training seats are :class:`HostedSeatEnv` s
whose policy, inside the game loop, is a hand-off: the loop's call for seat ``i`` becomes seat
``i``'s next observation, and the action the caller steps seat ``i``'s env with is the call's
answer. Pinned opponents and partners act inside the game task. So the observations are exactly
the game loop's (the extension property holds per seat) and the loop's rules hold (faults,
budgets, deadlines, who stopped the game).

Unlike the game loop driven by our own engine (``SupportsSeatedRollout``), a hosted seat *waits
for the other seats inside* ``step``: an engine that caps concurrent env steps below the number of
a group's training seats, or puts a step deadline on them, can stall or time such a group out. The
cookbook's ``do_group_rollout`` has neither. Its group is every training seat of every game of the
builder, centred together (the game loop's per-role centring needs our training loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import tinker
from tinker_cookbook.completers import StopCondition, TokensWithLogprobs
from tinker_cookbook.renderers import Renderer
from tinker_cookbook.rl.types import Action, ActionExtra, Env, Observation, StepResult

from envs.seats._loop import GameRecord

_END = object()
"""Put in a seat's inbox when its game is over."""


class GameHost:
    """One game played by :func:`envs.seats.play_game` in its own task; its training seats are
    handed to callers through :class:`HostedSeatEnv` (see the module docstring)."""

    def __init__(self, play: Callable[[dict[int, Any], int | None], Any], seats: list[int]) -> None:
        self._play = play
        """``play(policies, compaction_period)``: plays the game with these token-level policies on
        the training seats."""
        self.seats = seats
        self.inbox: dict[int, asyncio.Queue[Any]] = {s: asyncio.Queue() for s in seats}
        self.answers: dict[int, asyncio.Future[TokensWithLogprobs] | None] = dict.fromkeys(seats)
        self.task: asyncio.Task[GameRecord] | None = None
        self.record: GameRecord | None = None
        self.compaction_period: int | None = None

    def start(self) -> None:
        """Start the game task (once; any of its seats may ask first)."""
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> GameRecord:
        try:
            record = await self._play({s: _HandOff(self, s) for s in self.seats}, self.compaction_period)
            self.record = record
            return record
        finally:
            for s in self.seats:
                self.inbox[s].put_nowait(_END)

    def cancel(self) -> None:
        """Stop the game task if it still runs (the caller gave up on the group)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()


class _HandOff:
    """Seat ``seat``'s policy inside the game loop: post the observation, await the action."""

    def __init__(self, host: GameHost, seat: int) -> None:
        self.host, self.seat = host, seat

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, **_: Any
    ) -> TokensWithLogprobs:
        answer: asyncio.Future[TokensWithLogprobs] = asyncio.get_running_loop().create_future()
        self.host.answers[self.seat] = answer
        self.host.inbox[self.seat].put_nowait((model_input, stop))
        return await answer


class HostedSeatEnv(Env):
    """A training seat of a hosted game as a plain cookbook ``Env`` (see the module docstring).

    Its episode: the game loop's observations of this seat, one per turn; the last step returns
    the seat's whole reward (the game's and its env's) and its game metrics, or raises when the
    game failed (a player or the game raised, a deadline passed: the group's rollout error). A seat the game never
    reached (the other seat ended it first) is shown its opening and ends at its first step.
    """

    def __init__(
        self, host: GameHost, seat: int, renderer: Renderer, opening: Callable[[], Observation]
    ) -> None:
        self.host = host
        self.seat = seat
        self.renderer = renderer
        self._opening = opening
        self._stop: StopCondition = renderer.get_stop_sequences()
        self._over = False

    def set_compaction_period(self, period: int) -> None:
        """Compact this game's seats every ``period`` turns (``rollout.SupportsCompaction``)."""
        self.host.compaction_period = period or None

    async def _next(self) -> tuple[Observation, StopCondition] | None:
        item = await self.host.inbox[self.seat].get()
        if item is _END:
            self._over = True
            return None
        return item

    async def initial_observation(self) -> tuple[Observation, StopCondition]:
        self.host.start()
        try:
            got = await self._next()
        except asyncio.CancelledError:
            self.host.cancel()
            raise
        return got if got is not None else (self._opening(), self._stop)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if not self._over:
            answer = self.host.answers[self.seat]
            self.host.answers[self.seat] = None
            if answer is not None and not answer.done():
                stop_reason = (extra or {}).get("stop_reason") or "stop"
                answer.set_result(
                    TokensWithLogprobs(tokens=list(action), maybe_logprobs=None, stop_reason=stop_reason)
                )
            try:
                got = await self._next()
            except asyncio.CancelledError:
                self.host.cancel()
                raise
            if got is not None:
                ob, stop = got
                return StepResult(
                    reward=0.0, episode_done=False, next_observation=ob, next_stop_condition=stop
                )
        if self.host.task is not None:
            await asyncio.wait([self.host.task])  # the record is set once the task is done
        record = self.host.record
        if record is None:
            raise RuntimeError(f"seat {self.seat}: its game task ended without a record")
        if record.error is not None:  # a player or the game raised, or a deadline passed: not trained
            raise RuntimeError(
                f"seat {self.seat}: the game failed ({record.stop_reason}): "
                f"{record.error.error_type}: {record.error.error_message}"
            )
        result = record.seats[self.seat]
        reward = result.reward + sum(t.reward for t in result.trajectory.transitions)
        logs: dict[str, str | int | float] = {"game_stop": record.stop_reason}
        return StepResult(
            reward=reward,
            episode_done=True,
            next_observation=tinker.ModelInput.empty(),
            next_stop_condition=self._stop,
            metrics=dict(result.metrics),
            logs=logs,
        )
