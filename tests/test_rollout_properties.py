"""Property tests: random mixes of failing / hanging / slow envs and completers under every
strategy. No group is lost or double counted, every failure is recorded, every deadline fires,
every cleanup runs once, and no task is left running after the batch returns."""

from __future__ import annotations

import asyncio
import itertools
import math

import anyio
from hypothesis import given
from hypothesis import strategies as st
from tinker_cookbook.rl.types import StopReason

from completers import ScriptedTokenCompleter
from rollout import EngineConfig, RolloutEngine, RolloutLimits, Strategy, StrategyKind
from rollout.testing import ACTION, SyntheticEnv, SyntheticGroup

TURNS = 3
ROLLOUT_DEADLINE = 0.05
CALL_DEADLINE = 0.03

behaviours = st.one_of(
    st.just(("ok", 0)),
    st.tuples(st.just("fail"), st.integers(1, TURNS)),
    st.tuples(st.just("hang"), st.integers(1, TURNS)),
    st.tuples(st.just("slow"), st.integers(1, 3)),  # ms per step
    st.tuples(st.just("policy_fail"), st.integers(1, TURNS)),
    st.tuples(st.just("policy_hang"), st.integers(1, TURNS)),
)
"""One slot's behaviour on its *first* env; retried envs of the slot behave ``ok`` with
probability 1/2 (decided by the slot's ``flaky`` flag)."""

strategies = st.one_of(
    st.just(Strategy.fail_fast()),
    st.integers(0, 3).map(Strategy.retry),
    st.tuples(st.integers(1, 4), st.integers(0, 2)).map(lambda kr: Strategy.min_viable(*kr)),
)


class Probe:
    """Shared bookkeeping: env ids, which ids hung, how many scripted errors were raised."""

    def __init__(self) -> None:
        self.ids = itertools.count(1000)
        self.hung: set[int] = set()
        self.raised = 0
        self.policy_plan: dict[int, tuple[str, int]] = {}


class ProbeEnv(SyntheticEnv):
    def __init__(self, probe: Probe, uid: int, behaviour: tuple[str, int]):
        kind, k = behaviour
        super().__init__(
            TURNS,
            prompt=(uid, 3, 4),
            fail_at=k if kind == "fail" else None,
            hang_at=k if kind == "hang" else None,
            delay_s=k / 1000 if kind == "slow" else 0.0,
        )
        self.probe = probe
        self.uid = uid
        if kind.startswith("policy_"):
            probe.policy_plan[uid] = (kind, k)

    async def step(self, action, *, extra=None):
        if self.turn + 1 == self.hang_at:
            self.probe.hung.add(self.uid)
        if self.turn + 1 == self.fail_at:
            self.probe.raised += 1
        return await super().step(action, extra=extra)


class ProbePolicy(ScriptedTokenCompleter):
    """Fails / hangs on the k-th call of the env named by the observation's first token."""

    def __init__(self, probe: Probe):
        super().__init__([ACTION], cycle=True)
        self.probe = probe
        self.turns: dict[int, int] = {}

    async def __call__(self, model_input, stop, *, max_tokens=None):
        uid = model_input.to_ints()[0]
        turn = self.turns[uid] = self.turns.get(uid, 0) + 1
        plan = self.probe.policy_plan.get(uid)
        if plan is not None and plan[1] == turn:
            if plan[0] == "policy_fail":
                self.probe.raised += 1
                raise RuntimeError(f"policy failure for env {uid}")
            self.probe.hung.add(uid)
            await anyio.sleep_forever()
        return await super().__call__(model_input, stop, max_tokens=max_tokens)


def make_group(probe: Probe, plan: list[tuple[tuple[str, int], bool]]) -> SyntheticGroup:
    made: dict[int, int] = {}

    def factory(slot: int) -> ProbeEnv:
        made[slot] = made.get(slot, 0) + 1
        behaviour, flaky = plan[slot]
        if made[slot] > 1 and flaky:
            behaviour = ("ok", 0)
        return ProbeEnv(probe, next(probe.ids), behaviour)

    return SyntheticGroup(factory, size=len(plan))


@given(
    plans=st.lists(
        st.lists(st.tuples(behaviours, st.booleans()), min_size=1, max_size=4), min_size=1, max_size=4
    ),
    strategy=strategies,
    deadlines=st.sampled_from(["rollout", "per_call", "both"]),
    max_samples=st.sampled_from([None, 1, 3, 64]),
    max_steps=st.sampled_from([None, 2]),
    max_groups=st.sampled_from([None, 1, 2]),
    stream=st.booleans(),
)
def test_random_mixes_are_accounted_for(
    plans, strategy, deadlines, max_samples, max_steps, max_groups, stream
):
    probe = Probe()
    builders = [make_group(probe, plan) for plan in plans]
    limits = RolloutLimits(
        rollout_timeout_seconds=ROLLOUT_DEADLINE if deadlines != "per_call" else None,
        sampling_turn_timeout_seconds=CALL_DEADLINE if deadlines != "rollout" else None,
    )
    config = EngineConfig(
        limits=limits,
        step_timeout_s=CALL_DEADLINE if deadlines != "rollout" else None,
        strategy=strategy,
        max_concurrent_samples=max_samples,
        max_concurrent_env_steps=max_steps,
        max_concurrent_groups=max_groups,
    )
    engine = RolloutEngine(ProbePolicy(probe), config)

    async def main():
        with anyio.fail_after(30):  # a deadline that did not fire would hang here
            if stream:
                async with engine.stream(builders) as received:
                    outcomes = [o async for o in received]
            else:
                outcomes = list((await engine.run_batch(builders)).outcomes)
        assert asyncio.all_tasks() == {asyncio.current_task()}  # nothing left running
        return outcomes

    outcomes = anyio.run(main, backend="asyncio")

    # Every group exactly once, and counted consistently.
    assert sorted(o.index for o in outcomes) == list(range(len(builders)))
    seen_uids: set[int] = set()
    for o in outcomes:
        plan = plans[o.index]
        assert o.builder is builders[o.index]
        assert o.requested == len(plan) == o.completed + o.failed
        assert o.builder.cleanup_calls == 1  # type: ignore[attr-defined]
        assert o.retries <= strategy.max_retries
        if o.group is None:
            assert o.failure is not None and o.completed == 0 and not o.stats
            continue
        assert o.failure is None and len(o.group.trajectories_G) == o.completed == len(o.stats)
        if strategy.kind is StrategyKind.MIN_VIABLE:
            floor = strategy.min_successful or math.ceil(0.75 * len(plan))
            assert o.completed >= floor
        else:
            assert o.completed == o.requested  # fail-fast and retry keep whole groups only
        if strategy.kind is StrategyKind.FAIL_FAST:
            assert not o.errors
        for traj in o.group.trajectories_G:
            first = traj.transitions[0].ob if traj.transitions[0].ob.length else traj.final_ob
            if not first.length:  # timed out before its first observation (e.g. queued at a gate)
                assert traj.stop_reason == StopReason.ROLLOUT_TIMEOUT
                continue
            uid = first.to_ints()[0]
            assert uid not in seen_uids  # no trajectory counted twice
            seen_uids.add(uid)
            if uid in probe.hung:  # the deadline fired (only the rollout deadline keeps a trajectory)
                assert traj.stop_reason == StopReason.ROLLOUT_TIMEOUT
    # Every scripted failure is recorded somewhere (retried or not).
    recorded = sum(
        1 for o in outcomes for e in o.errors if e.error_type in ("ScriptedFailure", "RuntimeError")
    )
    assert recorded == probe.raised
    # Each hang ended as a typed timeout failure, a rollout-timeout trajectory, or was cancelled
    # with its failing group.
    timeouts = sum(1 for o in outcomes for e in o.errors if e.error_type in ("SamplingTurnTimeoutError", "StepTimeout"))
    assert timeouts <= len(probe.hung)
