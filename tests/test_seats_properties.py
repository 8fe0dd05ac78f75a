"""Property tests of the multi-seat game loop: drawn schedules of delays, faults, crashes, hangs
(cancelled by the call deadline) on any seat at any turn, and cancellation of the whole batch at
any moment: no deadlock, every seat's token prefix intact, every game accounted for, and the game
ends exactly where the schedule says."""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.model import SMOLLM2
from envs.seats import (
    STOP_SEAT_ERROR,
    STOP_SEAT_FAULT,
    STOP_SEAT_TIMEOUT,
    GameRecord,
    LoopConfig,
    Seat,
    SeatedGroupBuilder,
)
from envs.tictactoe.env import TicTacToeGame
from renderers_ext import load_renderer
from tests.seat_players import Behaviour, TokenRandom

R = load_renderer("qwen3_instruct", SMOLLM2)
TIMEOUT = 0.15
DEADLOCK_BOUND = 20.0  # seconds: far above the worst schedule (a hang costs TIMEOUT)

behaviours = st.builds(
    Behaviour,
    delay=st.sampled_from([0.0, 0.0, 0.001, 0.004]),
    kind=st.sampled_from(["ok", "ok", "ok", "ok", "raise", "hang", "truncated", "garbage"]),
)
schedules = st.dictionaries(st.integers(0, 4), behaviours, max_size=3)


def _builder(x_script, o_script, seed: int, self_play: bool) -> tuple[SeatedGroupBuilder, TokenRandom]:
    x = TokenRandom(R, seed, script=x_script)
    o = TokenRandom(R, seed + 1, script=o_script)
    seats = (Seat.policy(), Seat.policy() if self_play else Seat.pinned("o", o))
    b = SeatedGroupBuilder(
        make_game=lambda rng: TicTacToeGame(),
        renderer=R,
        seats=seats,
        games=1,
        loop=LoopConfig(call_timeout_s=TIMEOUT),
    )
    return b, x


def _check_prefixes(record: GameRecord) -> None:
    for seat in record.seats:
        seq: list[int] = []
        for t in seat.trajectory.transitions:
            ob = t.ob.to_ints()
            assert ob[: len(seq)] == seq, f"seat {seat.seat}: an observation does not extend its history"
            seq = ob + list(t.ac.tokens)
        assert seat.stats.breaks == ()


def _expected_end(record: GameRecord, x_script, o_script) -> None:
    """The first move whose behaviour is not ``ok`` ends the game, as its kind says."""
    scripts = (x_script, o_script)
    for m in range(record.moves + 1):
        seat, call = m % 2, m // 2
        kind = scripts[seat].get(call, Behaviour()).kind
        if m < record.moves - 1 or (m == record.moves - 1 and kind in ("ok", "raise", "hang")):
            assert kind == "ok", f"move {m} of seat {seat} was {kind} but the game went on"
            continue
        if m == record.moves - 1:  # the last move played was faulty
            assert record.stop_reason == STOP_SEAT_FAULT and record.stopped_by == seat and record.ok
            return
        # m == record.moves: the call that never made a move
        if record.ok:
            return  # the game ended by the rules before this call
        want = STOP_SEAT_ERROR if kind == "raise" else STOP_SEAT_TIMEOUT
        assert kind in ("raise", "hang") and record.stop_reason == want and record.stopped_by == seat
        return


@settings(max_examples=40)
@given(
    games=st.lists(st.tuples(schedules, schedules, st.booleans()), min_size=1, max_size=4),
    seed=st.integers(0, 1000),
)
def test_drawn_schedules_end_cleanly_and_account_for_every_game(games, seed) -> None:
    async def go() -> list[tuple[list[GameRecord], list]]:
        out: list = [None] * len(games)
        with anyio.fail_after(DEADLOCK_BOUND):  # a deadlock fails here
            async with anyio.create_task_group() as tg:
                for i, (xs, os_, self_play) in enumerate(games):
                    b, policy = _builder(xs, os_ if not self_play else {}, seed + 10 * i, self_play)

                    async def one(
                        i: int = i, b: SeatedGroupBuilder = b, policy: TokenRandom = policy
                    ) -> None:
                        records = await b.play(policy)
                        out[i] = (records, b.groups(records))

                    tg.start_soon(one)
        return out

    results = anyio.run(go)
    for (xs, os_, self_play), (records, outcomes) in zip(games, results, strict=True):
        assert len(records) == 1
        record = records[0]
        _check_prefixes(record)
        if not self_play:
            _expected_end(record, xs, os_)
        training_seats = 2 if self_play else 1
        assert sum(o.requested for o in outcomes) == training_seats
        for o in outcomes:
            assert o.requested == o.completed + o.failed
            assert (o.group is None) == (not record.ok)
        for seat in record.seats:
            assert seat.trajectory.stop_reason == record.stop_reason
            if seat.trajectory.transitions:
                assert seat.trajectory.transitions[-1].episode_done


@settings(max_examples=25)
@given(
    cancel_after=st.floats(0.0, 0.05),
    x_script=schedules,
    o_script=schedules,
    seed=st.integers(0, 1000),
)
def test_cancelling_a_batch_at_any_moment_leaves_nothing_running(
    cancel_after, x_script, o_script, seed
) -> None:
    async def go() -> tuple[bool, float]:
        b, policy = _builder(x_script, o_script, seed, self_play=False)
        b = SeatedGroupBuilder(
            make_game=b.make_game, renderer=R, seats=b.seats, games=3, loop=LoopConfig(call_timeout_s=TIMEOUT)
        )
        t0 = anyio.current_time()
        finished = False
        with anyio.fail_after(DEADLOCK_BOUND), anyio.move_on_after(cancel_after):
            records = await b.play(policy)
            finished = len(records) == 3
        return finished, anyio.current_time() - t0

    finished, elapsed = anyio.run(go)
    assert elapsed < DEADLOCK_BOUND
    assert finished or elapsed >= cancel_after
