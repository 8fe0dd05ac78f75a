"""Multi-seat games (envs.seats) on tic-tac-toe: seats, groups per role, accounting, ends."""

from __future__ import annotations

import anyio
import pytest
from tinker_cookbook.rl.data_processing import trajectory_to_data

from backend.model import SMOLLM2
from envs.seats import (
    METRIC_ILLEGAL,
    STOP_SEAT_ERROR,
    STOP_SEAT_FAULT,
    STOP_SEAT_TIMEOUT,
    LoopConfig,
    Seat,
    SeatedGroupBuilder,
    SeatEnv,
    play_game,
)
from envs.seats._solo import SoloSeatEnv
from envs.tictactoe.env import Metric, TicTacToeGame
from envs.tictactoe.players import OptimalPlayer, RandomPlayer
from renderers_ext import load_renderer
from rollout import AdvantageConfig, EngineConfig, assemble
from rollout._datums import group_advantages
from tests.seat_players import Behaviour, TokenRandom
from training._rollouts import SupportsSeatedRollout, _run_mixed, rollout_config

R = load_renderer("qwen3_instruct", SMOLLM2)


def builder(seats, games=8, **kw) -> SeatedGroupBuilder:
    return SeatedGroupBuilder(
        make_game=lambda rng: TicTacToeGame(), renderer=R, seats=tuple(seats), games=games, **kw
    )


def test_self_play_makes_one_group_per_role_with_zero_sum_rewards_and_whole_prefixes() -> None:
    b = builder([Seat.policy(), Seat.policy()], games=16)
    assert isinstance(b, SupportsSeatedRollout)
    outcomes = anyio.run(b.rollout_seated, TokenRandom(R, 0))
    assert [o.tags for o in outcomes] == [("as_x",), ("as_o",)]
    for o in outcomes:
        assert o.requested == o.completed + o.failed == 16
        assert o.group is not None
        for traj, stats in zip(o.group.trajectories_G, o.stats, strict=True):
            assert stats.breaks == () and stats.datums == 1
            assert len(trajectory_to_data(traj, 1.0)) == 1  # the cookbook makes one datum of it too
    x, o = outcomes[0].group, outcomes[1].group
    assert x is not None and o is not None
    assert [a + b for a, b in zip(x.final_rewards_G, o.final_rewards_G, strict=True)] == [0.0] * 16
    for gx, go, rx in zip(x.metrics_G, o.metrics_G, x.final_rewards_G, strict=True):
        assert (gx.get(Metric.WIN, 0) == 1.0) == (rx == 1.0) == (go.get(Metric.LOSS, 0) == 1.0)
    # per role: the group-centred advantage sums to zero within each role
    data = assemble([x, o])
    assert data.datums and len(data.datums) == 32


def test_pinned_opponent_acts_but_never_trains() -> None:
    b = builder([Seat.pinned("optimal", OptimalPlayer(seed=1)), Seat.policy()], games=6)
    outcomes = anyio.run(b.rollout_seated, TokenRandom(R, 3))
    assert [o.tags for o in outcomes] == [("as_o",)]
    group = outcomes[0].group
    assert group is not None and all(r <= 0.0 for r in group.final_rewards_G)  # nobody beats minimax
    records = anyio.run(b.play, TokenRandom(R, 3))
    for r in records:
        assert [s.trains for s in r.seats] == [False, True]
        assert r.seats[0].player == "optimal" and r.seats[0].trajectory.transitions  # it acted, logged


def test_pool_draws_a_player_per_game() -> None:
    pool = Seat.pool("mix", [Seat.policy(), Seat.pinned("random", RandomPlayer(seed=2))])
    b = builder([Seat.policy(), pool], games=24)
    records = anyio.run(b.play, TokenRandom(R, 4))
    names = {r.seats[1].player for r in records}
    assert names == {"policy", "random"}
    outcomes = b.groups(records)
    o_group = next(o for o in outcomes if o.tags == ("as_o",))
    assert o_group.requested == sum(r.seats[1].player == "policy" for r in records)


def test_a_faulty_action_forfeits_the_game_for_every_seat_and_still_trains() -> None:
    policy = TokenRandom(R, 0, script={2: Behaviour(kind="truncated")})
    records = anyio.run(builder([Seat.policy(), Seat.policy()], games=1).play, policy)
    r = records[0]
    assert r.ok and r.stop_reason == STOP_SEAT_FAULT and r.stopped_by == 0 and r.moves == 3
    assert r.seats[0].metrics[METRIC_ILLEGAL] == 1.0 and r.seats[0].metrics[Metric.ILLEGAL] == 1.0
    assert [s.trajectory.stop_reason for s in r.seats] == [STOP_SEAT_FAULT] * 2
    assert all(s.trajectory.transitions[-1].episode_done for s in r.seats)


@pytest.mark.parametrize(("kind", "stop"), [("raise", STOP_SEAT_ERROR), ("hang", STOP_SEAT_TIMEOUT)])
def test_a_crash_or_timeout_ends_the_game_for_every_seat_and_is_counted_failed(kind: str, stop: str) -> None:
    opponent = TokenRandom(R, 1, script={1: Behaviour(kind=kind)})
    b = builder([Seat.policy(), Seat.pinned("flaky", opponent)], games=1, loop=LoopConfig(call_timeout_s=0.2))
    records = anyio.run(b.play, TokenRandom(R, 0))
    r = records[0]
    assert not r.ok and r.stop_reason == stop and r.stopped_by == 1 and r.error is not None
    outcome = b.groups(records)[0]
    assert outcome.group is None and outcome.failure is not None
    assert (outcome.requested, outcome.completed, outcome.failed) == (1, 0, 1)


def test_the_training_loop_plays_seated_builders_beside_plain_ones() -> None:
    from tests.broken_envs import EchoGroup  # a plain builder ("stop" ends its episodes)

    builders = [builder([Seat.policy(), Seat.policy()], games=2), EchoGroup()]
    result = anyio.run(_run_mixed, builders, TokenRandom(R, 5), rollout_config(8))
    assert [o.tags for o in result.outcomes][:2] == [("as_x",), ("as_o",)]
    assert len(result.outcomes) == 3 and result.outcomes[2].completed == 2
    assert (
        result.metrics["rollouts/requested"]
        == result.metrics["rollouts/completed"] + result.metrics["rollouts/failed"]
    )


def test_a_solo_seat_env_sees_what_the_seat_sees_under_the_game_loop() -> None:
    """The O seat against a scripted X: as a plain env (X inline) and under the loop, same tokens."""

    async def go() -> tuple[list[int], list[int]]:
        game = TicTacToeGame()
        solo = SoloSeatEnv(game, 1, R, {0: OptimalPlayer(seed=7)})
        ob, _ = await solo.initial_observation()  # type: ignore[misc]
        b = builder([Seat.pinned("optimal", OptimalPlayer(seed=7)), Seat.policy()], games=1)
        record = await b.play_one(0, TokenRandom(R, 0))
        first = record.seats[1].trajectory.transitions[0].ob
        return ob.to_ints(), first.to_ints()

    solo_ob, loop_ob = anyio.run(go)
    assert solo_ob == loop_ob


def test_a_seat_env_starts_with_what_it_was_told_and_refuses_to_be_stepped_alone() -> None:
    env = SeatEnv(TicTacToeGame(), 1, R)
    env.tell([{"role": "user", "content": "X played 5."}])
    assert env.initial_messages()[-1]["content"] == "X played 5."
    with pytest.raises(RuntimeError, match="played by the game loop"):
        anyio.run(SeatEnv(TicTacToeGame(), 0, R).initial_observation)


def test_an_engine_stepping_make_envs_plays_the_same_games_through_hosted_seats() -> None:
    """``make_envs`` hands out every game's training seats as plain envs: our engine, stepping
    each env of the group concurrently, plays whole games (zero-sum, every prefix intact)."""
    from rollout import RolloutEngine

    b = builder([Seat.policy(), Seat.policy()], games=4)
    outcome = anyio.run(RolloutEngine(TokenRandom(R, 0)).run_group, b)
    assert outcome.failure is None and outcome.group is not None
    assert outcome.requested == outcome.completed == 8
    rewards = outcome.group.get_total_rewards()
    assert [rewards[i] + rewards[i + 1] for i in range(0, 8, 2)] == [0.0] * 4  # X and O of one game
    assert all(s.breaks == () and s.datums == 1 for s in outcome.stats)


def test_advantages_are_centred_per_role_by_default_and_across_roles_on_request() -> None:
    policy = TokenRandom(R, 11)
    per_role = anyio.run(builder([Seat.policy(), Seat.policy()], games=12).rollout_seated, policy)
    pooled = anyio.run(
        builder([Seat.policy(), Seat.policy()], games=12, group_by_role=False).rollout_seated, policy
    )
    assert [o.tags for o in pooled] == [("as_all",)] and pooled[0].requested == 24
    for o in per_role:
        assert o.group is not None
        per_traj = [a[0] for a in group_advantages(o.group, AdvantageConfig())]
        assert sum(per_traj) == pytest.approx(0.0, abs=1e-6)  # centred within the role's group
        rewards = o.group.get_total_rewards()
        mean = sum(rewards) / len(rewards)
        assert per_traj == pytest.approx([r - mean for r in rewards])


def test_compaction_reaches_every_seat() -> None:
    from renderers_ext import CompactingRenderer
    from rollout import EngineConfig

    b = builder([Seat.policy(), Seat.policy()], games=2)
    outcomes = anyio.run(b.rollout_seated, TokenRandom(R, 2), EngineConfig(compaction_period=2))
    assert all(o.group is not None and o.completed == 2 for o in outcomes)

    async def one() -> list[SeatEnv]:
        game, envs, _ = b._setup(0)
        policies = [TokenRandom(R, 3)] * 2
        config = LoopConfig(compaction_period=2)
        await play_game(game, envs, policies, names=["a", "b"], trains=[True, True], config=config)
        return envs

    envs = anyio.run(one)
    assert all(isinstance(e.renderer, CompactingRenderer) and e.renderer.period == 2 for e in envs)


def test_a_seeded_config_places_every_policy_call_and_reproduces_the_games() -> None:
    """With ``EngineConfig(seed=...)`` each call of the policy carries its ``SampleCall`` (group,
    the seat's slot, its turn), as the engine does for the envs it steps: a policy that draws from
    its call's seed plays the same games again, whatever order the calls arrive in."""
    import random

    from rollout import SampleCall
    from training import call_seed

    class Placed(TokenRandom):
        seen: list[SampleCall]

        async def __call__(self, model_input, stop, *, max_tokens=None, call: SampleCall | None = None):  # type: ignore[override]
            assert call is not None
            self.seen.append(call)
            await anyio.sleep(random.random() * 0.002)  # arrival order differs run to run
            self.rng = random.Random(call_seed(call))
            return await super().__call__(model_input, stop, max_tokens=max_tokens)

    def run() -> tuple[list[float], list[SampleCall]]:
        policy = Placed(R, 0)
        policy.seen = []
        b = builder([Seat.policy(), Seat.policy()], games=6)
        outcomes = anyio.run(b.rollout_seated, policy, EngineConfig(seed=5), 3)
        rewards = [r for o in outcomes if o.group is not None for r in o.group.final_rewards_G]
        return rewards, policy.seen

    (first, calls), (second, _) = run(), run()
    assert first == second
    assert {(c.seed, c.group, c.attempt) for c in calls} == {(5, 3, 0)}
    assert len({(c.slot, c.turn) for c in calls}) == len(calls)  # one place per call
    for slot in {c.slot for c in calls}:
        turns = sorted(c.turn for c in calls if c.slot == slot)
        assert turns == list(range(len(turns)))
