"""Rollout engine: budgets and stop reasons, deadlines, strategies, gates, streaming, cancellation."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from tinker_cookbook.rl.types import StopReason

from completers import ScriptedTokenCompleter
from rollout import (
    BatchAborted,
    EngineConfig,
    ExtensionCheck,
    GroupOutcome,
    RolloutEngine,
    RolloutLimits,
    Strategy,
    StrategyKind,
    run_episode,
)
from rollout.testing import ACTION, SyntheticEnv, SyntheticGroup


def run(coro_fn, *args):
    return anyio.run(coro_fn, *args)


def assert_accounting(outcomes: tuple[GroupOutcome, ...] | list[GroupOutcome]) -> None:
    for o in outcomes:
        assert o.requested == o.completed + o.failed
        assert (o.group is None) == (o.failure is not None)
        if o.group is not None:
            assert len(o.group.trajectories_G) == o.completed == len(o.stats)
            assert list(o.group.rollout_errors) == list(o.errors)


# --- single rollouts: budgets and stop reasons ---------------------------------------------------


def test_env_completion_sets_completed_and_records_every_turn():
    async def main():
        env = SyntheticEnv(turns=5, reward=lambda t: float(t))
        traj, stats = await run_episode(ScriptedTokenCompleter([ACTION], cycle=True), env)
        assert traj.stop_reason == StopReason.COMPLETED
        assert [t.reward for t in traj.transitions] == [1.0, 2.0, 3.0, 4.0, 5.0]
        assert traj.transitions[-1].episode_done and not any(t.episode_done for t in traj.transitions[:-1])
        assert traj.transitions[-1].metrics["stop/completed"] == 1.0
        assert stats.turns == 5 and stats.sampled_tokens == 15 and not stats.breaks and stats.datums == 1

    run(main)


@pytest.mark.parametrize(
    ("limits", "reason", "turns"),
    [
        (RolloutLimits(max_turns=3), StopReason.MAX_TURNS, 3),
        # prompt 4 tokens, each turn adds 3 (action) + 2 (feedback): 4, 9, 14 -> 1 token left: stop
        (RolloutLimits(max_trajectory_tokens=15), StopReason.MAX_TOKENS, 2),
        (RolloutLimits(max_sampled_tokens=7), StopReason.MAX_SAMPLED_TOKENS, 2),
    ],
)
def test_budgets_stop_with_their_reason(limits, reason, turns):
    async def main():
        traj, stats = await run_episode(
            ScriptedTokenCompleter([ACTION], cycle=True), SyntheticEnv(turns=50), EngineConfig(limits=limits)
        )
        assert traj.stop_reason == reason
        assert stats.turns == turns == len(traj.transitions)
        last = traj.transitions[-1]
        assert last.episode_done and last.metrics[f"stop/{reason}"] == 1.0
        assert [k for k in last.metrics if k.startswith("stop/")] == [f"stop/{reason}"]

    run(main)


def test_per_turn_max_tokens_is_passed_to_the_completer():
    seen: list[int | None] = []

    class Recording(ScriptedTokenCompleter):
        async def __call__(self, model_input, stop, *, max_tokens=None):
            seen.append(max_tokens)
            return await super().__call__(model_input, stop, max_tokens=max_tokens)

    async def main():
        limits = RolloutLimits(max_turn_tokens=2, max_sampled_tokens=5)
        traj, _ = await run_episode(Recording([ACTION], cycle=True), SyntheticEnv(turns=10), EngineConfig(limits=limits))
        # sampled: 2, 4 -> remaining 1 -> MAX_SAMPLED_TOKENS; the cap is min(turn, remaining)
        assert seen == [2, 2]
        assert all(t.ac.stop_reason == "length" for t in traj.transitions)
        assert traj.stop_reason == StopReason.MAX_SAMPLED_TOKENS

    run(main)


def test_rollout_deadline_keeps_the_prefix():
    async def main():
        env = SyntheticEnv(turns=10, hang_at=4)
        traj, stats = await run_episode(
            ScriptedTokenCompleter([ACTION], cycle=True), env, EngineConfig(limits=RolloutLimits(rollout_timeout_seconds=0.2))
        )
        assert traj.stop_reason == StopReason.ROLLOUT_TIMEOUT
        assert stats.turns == 3 and len(traj.transitions) == 3  # the hanging 4th turn is dropped
        assert traj.transitions[-1].metrics["stop/rollout_timeout"] == 1.0

    run(main)


def test_sample_and_step_deadlines_raise_typed_failures():
    from tinker_cookbook.rl.rollout_runner import SamplingTurnTimeoutError

    from rollout import StepTimeout

    async def main():
        with pytest.raises(SamplingTurnTimeoutError):  # the cookbook's own error
            await run_episode(
                ScriptedTokenCompleter([ACTION], cycle=True, hang_calls={2}),
                SyntheticEnv(turns=5),
                EngineConfig(limits=RolloutLimits(sampling_turn_timeout_seconds=0.05)),
            )
        with pytest.raises(StepTimeout):
            await run_episode(
                ScriptedTokenCompleter([ACTION], cycle=True),
                SyntheticEnv(turns=5, hang_at=2),
                EngineConfig(step_timeout_s=0.05),
            )

    run(main)


def test_cookbook_rollout_limits_on_the_env_are_honoured():
    async def main():
        env = SyntheticEnv(turns=10)
        env.rollout_limits = RolloutLimits(max_turns=2)  # type: ignore[attr-defined]
        traj, _ = await run_episode(ScriptedTokenCompleter([ACTION], cycle=True), env)
        assert traj.stop_reason == StopReason.MAX_TURNS and len(traj.transitions) == 2
        # an explicit budget wins over the env's
        env = SyntheticEnv(turns=10)
        env.rollout_limits = RolloutLimits(max_turns=2)  # type: ignore[attr-defined]
        traj, _ = await run_episode(ScriptedTokenCompleter([ACTION], cycle=True), env, EngineConfig(limits=RolloutLimits(max_turns=4)))
        assert len(traj.transitions) == 4

    run(main)


def test_bad_config_is_a_one_line_error():
    for make in (
        lambda: RolloutLimits(max_turns=0),
        lambda: RolloutLimits(rollout_timeout_seconds=-1),
        lambda: EngineConfig(step_timeout_s=0),
        lambda: Strategy(StrategyKind.FAIL_FAST, max_retries=2),
        lambda: Strategy.min_viable(0),
        lambda: EngineConfig(max_concurrent_samples=0),
        lambda: EngineConfig(compaction_period=0),
        lambda: EngineConfig(extension_check="exact"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError) as info:
            make()
        assert "\n" not in str(info.value)


def test_extension_check_given_as_text_means_its_mode():
    """``"off"`` (a config file's value) turns the check off, as ``ExtensionCheck.OFF`` does."""
    config = EngineConfig(extension_check="off")  # type: ignore[arg-type]
    assert config.extension_check is ExtensionCheck.OFF
    env = SyntheticEnv(turns=3, break_at=1)
    traj, stats = run(lambda: run_episode(ScriptedTokenCompleter([ACTION], cycle=True), env, config))
    assert len(traj.transitions) == 3
    assert stats.breaks == () and stats.datums == 0  # no check, no accounting


# --- groups and strategies ------------------------------------------------------------------------


def _group(size=4, fail_slots=(), fail_times=1, **kw) -> SyntheticGroup:
    """Slots in ``fail_slots`` fail at turn 2 on their first ``fail_times`` envs."""
    made: dict[int, int] = {}

    def factory(i: int) -> SyntheticEnv:
        made[i] = made.get(i, 0) + 1
        fails = i in fail_slots and made[i] <= fail_times
        return SyntheticEnv(turns=3, fail_at=2 if fails else None)

    return SyntheticGroup(factory, size=size, **kw)


def test_fail_fast_drops_the_group_and_counts_everything():
    async def main():
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(strategy=Strategy.fail_fast()))
        result = await engine.run_batch([_group(fail_slots=(1,)), _group()])
        bad, good = result.outcomes
        assert bad.group is None and bad.failure is not None
        assert bad.failure.error_type == "ScriptedFailure" and bad.failed == 4 and bad.completed == 0
        assert good.ok and good.completed == 4
        assert result.metrics["groups/failed"] == 1 and result.metrics["rollouts/failed"] == 4
        assert result.metrics["failures/ScriptedFailure"] == 1
        assert_accounting(result.outcomes)
        assert all(b.cleanup_calls == 1 for b in (bad.builder, good.builder))  # type: ignore[attr-defined]

    run(main)


def test_retry_recovers_on_a_fresh_env_of_the_same_slot():
    async def main():
        builder = _group(fail_slots=(2,), fail_times=1)
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(strategy=Strategy.retry(2)))
        (o,) = (await engine.run_batch([builder])).outcomes
        assert o.ok and o.completed == 4 and o.retries == 1
        assert [e.error_type for e in o.errors] == ["ScriptedFailure"]
        assert builder.make_calls == 2 and builder.cleanup_calls == 1

    run(main)


def test_retry_budget_exhausted_fails_the_group():
    async def main():
        builder = _group(fail_slots=(0, 1, 2), fail_times=9)
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(strategy=Strategy.retry(2)))
        (o,) = (await engine.run_batch([builder])).outcomes
        assert not o.ok and o.retries == 2 and len(o.errors) >= 3  # concurrent slots may fail too
        assert_accounting([o])

    run(main)


def test_min_viable_keeps_survivors_above_the_floor_only():
    async def main():
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(strategy=Strategy.min_viable(3)))
        result = await engine.run_batch([_group(fail_slots=(0,)), _group(fail_slots=(0, 1))])
        kept, dropped = result.outcomes
        assert kept.ok and kept.completed == 3 and kept.failed == 1
        assert len(kept.group.trajectories_G) == 3  # type: ignore[union-attr]
        assert not dropped.ok and dropped.failure.error_type == "GroupBelowFloor"  # type: ignore[union-attr]
        assert result.metrics["rollouts/requested"] == 8
        assert result.metrics["rollouts/completed"] + result.metrics["rollouts/failed"] == 8
        assert_accounting(result.outcomes)

    run(main)


def test_group_level_errors_are_recorded_not_raised():
    from tinker_cookbook.rl.types import Trajectory

    async def main():
        broken_make = SyntheticGroup(lambda i: SyntheticEnv(2), size=2, fail_make=True)
        bad_rewards = SyntheticGroup(lambda i: SyntheticEnv(2), size=2, reward_fn=lambda ts: [1.0])

        class SlowReward(SyntheticGroup):
            async def compute_group_rewards(self, trajectory_group: list[Trajectory], env_group):
                await anyio.sleep(10)
                return [(0.0, {}) for _ in trajectory_group]

        slow = SlowReward(lambda i: SyntheticEnv(2), size=2)
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(reward_timeout_s=0.05))
        result = await engine.run_batch([broken_make, bad_rewards, slow])
        kinds = [o.failure.error_type for o in result.outcomes]  # type: ignore[union-attr]
        assert kinds == ["ScriptedFailure", "InvalidGroup", "RewardTimeout"]
        assert [o.requested for o in result.outcomes] == [0, 2, 2]
        assert all(b.cleanup_calls == 1 for b in (broken_make, bad_rewards, slow))
        assert_accounting(result.outcomes)

    run(main)


def test_abort_batch_cancels_the_rest_and_reports_partial_results():
    async def main():
        hang = SyntheticGroup(lambda i: SyntheticEnv(3, hang_at=2), size=2)
        bad = _group(fail_slots=(0,))
        engine = RolloutEngine(
            ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(strategy=Strategy.fail_fast(abort_batch=True))
        )
        with pytest.raises(BatchAborted) as info:
            await engine.run_batch([hang, bad])
        assert info.value.cancelled == 1
        assert [o.index for o in info.value.result.outcomes] == [1]
        assert hang.cleanup_calls == 1 and bad.cleanup_calls == 1
        assert "\n" not in str(info.value)

    run(main)


# --- limiters ----------------------------------------------------------------------------------------


def test_sampling_limiter_bounds_in_flight_calls():
    async def main():
        policy = ScriptedTokenCompleter([ACTION], cycle=True, delay=0.002)
        engine = RolloutEngine(policy, EngineConfig(max_concurrent_samples=5))
        result = await engine.run_batch([_group(size=4) for _ in range(6)])
        assert policy.max_in_flight == 5  # reached, never exceeded
        assert result.metrics["rollouts/completed"] == 24

    run(main)


def test_a_freed_sampling_slot_starts_the_waiting_call_before_the_env_step():
    """With every slot taken, the call waiting for a slot starts as soon as one is released,
    before the releasing episode's env step: the sampler is never kept idle by env work."""
    events: list[str] = []

    class Recording(SyntheticEnv):
        async def step(self, action, *, extra=None):
            events.append("step")
            return await super().step(action, extra=extra)

    class RecordingPolicy(ScriptedTokenCompleter):
        async def __call__(self, *args, **kwargs):
            events.append("call")
            return await super().__call__(*args, **kwargs)

    async def main():
        engine = RolloutEngine(
            RecordingPolicy([ACTION], cycle=True, delay=0.001), EngineConfig(max_concurrent_samples=1)
        )
        await engine.run_batch([SyntheticGroup(lambda i: Recording(2), size=2)])

    run(main)
    # two episodes x two turns behind one slot: each step follows the next call's start
    assert events == ["call", "call", "step", "call", "step", "call", "step", "step"]


def test_env_step_limiter_bounds_in_flight_steps():
    in_flight = 0
    peak = 0

    class Counting(SyntheticEnv):
        async def step(self, action, *, extra=None):
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                await anyio.sleep(0.002)
                return await super().step(action, extra=extra)
            finally:
                in_flight -= 1

    async def main():
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(max_concurrent_env_steps=3))
        await engine.run_batch([SyntheticGroup(lambda i: Counting(3), size=4) for _ in range(3)])
        assert peak == 3

    run(main)


def test_a_cancelled_rollout_frees_its_sampling_slot():
    """A rollout cancelled while it waits for (or holds) a sampling slot gives the slot back:
    the engine's next batch runs at the full limit."""

    async def main():
        policy = ScriptedTokenCompleter([ACTION], cycle=True, delay=0.005)
        engine = RolloutEngine(policy, EngineConfig(max_concurrent_samples=2))
        with anyio.move_on_after(0.012):  # cancels rollouts waiting for a slot and holding one
            await engine.run_batch([_group(size=3) for _ in range(2)])
        policy.max_in_flight = 0
        result = await engine.run_batch([_group(size=3) for _ in range(2)])
        assert result.metrics["rollouts/completed"] == 6
        assert policy.max_in_flight == 2

    run(main)


def test_a_capacity_limiter_of_ones_own_bounds_the_calls_and_is_returned_whole():
    """``run_episode`` takes any ``CallLimiter``: an ``anyio.CapacityLimiter`` (which knows its
    borrowers) bounds concurrent calls, free slots taken without waiting, and every token is back
    once the episodes end, also after one is cancelled while it waits for a slot."""

    async def main():
        policy = ScriptedTokenCompleter([ACTION], cycle=True, delay=0.002)
        limiter = anyio.CapacityLimiter(2)
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(lambda: run_episode(policy, SyntheticEnv(turns=3), sample_limiter=limiter))
        assert policy.max_in_flight == 2 and limiter.borrowed_tokens == 0
        with anyio.move_on_after(0.003):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(lambda: run_episode(policy, SyntheticEnv(turns=3), sample_limiter=limiter))
        assert limiter.borrowed_tokens == 0 and limiter.statistics().tasks_waiting == 0

    run(main)


def test_stream_yields_groups_as_they_finish():
    async def main():
        slow = SyntheticGroup(lambda i: SyntheticEnv(3, delay_s=0.05), size=2)
        fast = SyntheticGroup(lambda i: SyntheticEnv(3), size=2)
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True))
        async with engine.stream([slow, fast]) as outcomes:
            order = [o.index async for o in outcomes]
        assert order == [1, 0]

    run(main)


def test_leaving_a_stream_early_cancels_the_rest_and_cleans_up():
    async def main():
        hang = SyntheticGroup(lambda i: SyntheticEnv(3, hang_at=1), size=3)
        fast = SyntheticGroup(lambda i: SyntheticEnv(3), size=2)
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True))
        async with engine.stream([hang, fast]) as outcomes:
            async for o in outcomes:
                assert o.index == 1
                break
        assert hang.cleanup_calls == 1 and fast.cleanup_calls == 1

    run(main)


def test_cancelling_a_batch_midway_leaves_no_tasks_and_cleans_every_group_once():
    async def main():
        builders = [
            SyntheticGroup(lambda i: SyntheticEnv(50, delay_s=0.01), size=3, cleanup_delay_s=0.01)
            for _ in range(5)
        ]
        builders.append(SyntheticGroup(lambda i: SyntheticEnv(5, hang_at=2), size=3))
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(max_concurrent_samples=4))
        before = len(asyncio.all_tasks())
        with anyio.move_on_after(0.1) as scope:
            await engine.run_batch(builders)
        assert scope.cancelled_caught
        assert len(asyncio.all_tasks()) == before
        for b in builders:
            assert b.make_calls == 1 and b.cleanup_calls == 1  # cleanup ran despite cancellation

    anyio.run(main, backend="asyncio")


def test_cookbook_strategies_convert():
    from tinker_cookbook.rl.rollout_strategy import FailFast, MinViableGroup, RetryOnFailure

    assert Strategy.from_cookbook(FailFast()) == Strategy.fail_fast()
    assert Strategy.from_cookbook(RetryOnFailure(max_retries=5)) == Strategy.retry(5)
    assert Strategy.from_cookbook(MinViableGroup(min_successful=3, max_retries=1)) == Strategy.min_viable(
        3, 1
    )
    with pytest.raises(ValueError, match="per_rollout_timeout"):
        Strategy.from_cookbook(RetryOnFailure(per_rollout_timeout=5))


def test_cleanup_failures_and_hangs_are_recorded_without_losing_the_group():
    class BadCleanup(SyntheticGroup):
        async def cleanup(self) -> None:
            await super().cleanup()
            raise OSError("sandbox already gone")

    class HangingCleanup(SyntheticGroup):
        async def cleanup(self) -> None:
            await anyio.sleep_forever()

    async def main():
        bad = BadCleanup(lambda i: SyntheticEnv(2), size=2)
        hang = HangingCleanup(lambda i: SyntheticEnv(2), size=2)
        engine = RolloutEngine(ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(cleanup_timeout_s=0.05))
        result = await engine.run_batch([bad, hang])
        assert [o.ok for o in result.outcomes] == [True, True]
        assert [[e.error_type for e in o.errors] for o in result.outcomes] == [
            ["OSError"],
            ["CleanupTimeout"],
        ]
        assert result.metrics["failures/OSError"] == 1 and result.metrics["failures/CleanupTimeout"] == 1
        assert_accounting(result.outcomes)

    run(main)


def test_stream_raises_batch_aborted_on_exit():
    async def main():
        hang = SyntheticGroup(lambda i: SyntheticEnv(3, hang_at=2), size=2)
        engine = RolloutEngine(
            ScriptedTokenCompleter([ACTION], cycle=True), EngineConfig(strategy=Strategy.retry(0, abort_batch=True))
        )
        received = []
        with pytest.raises(BatchAborted) as info:
            async with engine.stream([hang, _group(fail_slots=(0,))]) as outcomes:
                received = [o.index async for o in outcomes]
        assert received == [1] and info.value.cancelled == 1 and hang.cleanup_calls == 1

    run(main)


def test_an_engine_serves_one_event_loop_after_another():
    """The limiters belong to the event loop that uses them: an engine reused by a second
    ``asyncio.run`` still bounds its calls."""
    import asyncio

    policy = ScriptedTokenCompleter([ACTION], cycle=True, delay=0.002)
    engine = RolloutEngine(policy, EngineConfig(max_concurrent_samples=2))
    for _ in range(2):
        policy.max_in_flight = 0
        result = asyncio.run(engine.run_batch([_group(size=3) for _ in range(2)]))
        assert result.metrics["rollouts/completed"] == 6
        assert policy.max_in_flight == 2


def test_max_tool_calls_is_pushed_through_the_cookbook_seam(caplog):
    """``RolloutLimits.max_tool_calls`` reaches envs with ``set_max_tool_calls`` (the cookbook
    runner's seam); other envs log that it is not enforced."""
    pushed: list[int] = []

    class ToolEnv(SyntheticEnv):
        def set_max_tool_calls(self, n: int) -> None:
            pushed.append(n)

    async def main():
        config = EngineConfig(limits=RolloutLimits(max_tool_calls=3))
        await run_episode(ScriptedTokenCompleter([ACTION], cycle=True), ToolEnv(turns=2), config)
        assert pushed == [3]
        with caplog.at_level("WARNING"):
            await run_episode(ScriptedTokenCompleter([ACTION], cycle=True), SyntheticEnv(turns=2), config)
        assert "max_tool_calls=3" in caplog.text and "not be enforced" in caplog.text

    run(main)
