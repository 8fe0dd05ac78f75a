"""Parity with the cookbook's own rollout loop: on the same env, policy and budgets, our
trajectories equal ``tinker_cookbook.rl.rollout_runner.run_rollout``'s (observations, actions,
rewards, done flags, metrics, stop reasons)."""

from __future__ import annotations

import anyio
from hypothesis import given
from hypothesis import strategies as st
from tinker_cookbook.rl.rollout_limits import RolloutLimits
from tinker_cookbook.rl.rollout_runner import run_rollout as cookbook_run_rollout

from completers import ScriptedTokenCompleter
from rollout import EngineConfig, ExtensionCheck, run_episode
from rollout.testing import SyntheticEnv

optional = st.none() | st.integers(1, 40)


def snapshot(traj):
    return (
        [
            (t.ob.to_ints(), t.ac.tokens, t.ac.stop_reason, t.reward, t.episode_done, dict(t.metrics))
            for t in traj.transitions
        ],
        traj.final_ob.to_ints(),
        traj.stop_reason,
    )


@given(
    turns=st.integers(1, 8),
    max_turns=st.none() | st.integers(1, 10),
    max_trajectory_tokens=optional,
    max_sampled_tokens=optional,
    max_turn_tokens=st.none() | st.integers(1, 4),
    scripts=st.lists(st.lists(st.integers(11, 99), min_size=1, max_size=4), min_size=1, max_size=3),
)
def test_same_trajectories_as_the_cookbook_runner(
    turns, max_turns, max_trajectory_tokens, max_sampled_tokens, max_turn_tokens, scripts
):
    limits = RolloutLimits(
        max_turns=max_turns,
        max_trajectory_tokens=max_trajectory_tokens,
        max_sampled_tokens=max_sampled_tokens,
        max_turn_tokens=max_turn_tokens,
    )
    # the cookbook leaves stop_reason None when an env ends without a stop metric
    config = EngineConfig(limits=limits, set_completed_stop_reason=False, extension_check=ExtensionCheck.OFF)

    async def main():
        theirs = await cookbook_run_rollout(
            ScriptedTokenCompleter(scripts, cycle=True), SyntheticEnv(turns), limits=limits
        )
        ours, stats = await run_episode(ScriptedTokenCompleter(scripts, cycle=True), SyntheticEnv(turns), config)
        assert snapshot(ours) == snapshot(theirs)
        assert stats.turns == sum(1 for t in ours.transitions if t.ob.length)

    anyio.run(main)
