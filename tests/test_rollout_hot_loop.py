"""The engine's hot loop inlines the extension tracker's common turn (``ExtensionTracker.hot_state``):
its stats must equal the tracker's own methods replayed over the same trajectory, whatever the
observations do (extend, break anywhere, split into several chunks) and in every check mode."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
import tinker
from hypothesis import given, settings
from hypothesis import strategies as st
from tinker_cookbook.completers import StopCondition, TokenCompleter, TokensWithLogprobs
from tinker_cookbook.rl.types import Action, ActionExtra, Env, StepResult

from rollout import EngineConfig, ExtensionCheck, RolloutLimits, run_episode
from rollout._extension import ExtensionTracker

# One turn: (action tokens, what the next observation does, where, chunk split)
turns_st = st.lists(
    st.tuples(
        st.lists(st.integers(1, 5), min_size=0, max_size=3),
        st.sampled_from(["extend", "extend", "extend", "break", "drop", "same"]),
        st.integers(0, 1000),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


def _ob(tokens: list[int], split: bool) -> tinker.ModelInput:
    if split and len(tokens) > 1:
        cut = len(tokens) // 2
        return tinker.ModelInput(
            chunks=[
                tinker.EncodedTextChunk(tokens=tokens[:cut]),
                tinker.EncodedTextChunk(tokens=tokens[cut:]),
            ]
        )
    return tinker.ModelInput(chunks=[tinker.EncodedTextChunk(tokens=list(tokens))])


class ScriptEnv(Env):
    def __init__(self, script: Sequence[tuple[list[int], str, int, bool]]):
        self.script = script
        self.turn = 0
        self.tokens = [1, 2, 3]

    async def initial_observation(self) -> tuple[tinker.ModelInput, StopCondition]:
        return _ob(self.tokens, False), [0]

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        _, kind, where, split = self.script[self.turn]
        self.turn += 1
        if self.turn >= len(self.script):
            return StepResult(0.0, True, tinker.ModelInput.empty(), [0])
        extended = self.tokens + list(action) + [9]
        if kind == "break" and extended:
            i = where % len(extended)
            extended[i] = 100 + extended[i]
        elif kind == "drop" and len(extended) > 1:
            del extended[where % len(extended)]
        elif kind == "same":
            extended = list(self.tokens)  # the action is missing from the next observation
        self.tokens = extended
        return StepResult(0.0, False, _ob(extended, split), [0])


class ScriptPolicy(TokenCompleter):
    def __init__(self, script: Sequence[tuple[list[int], str, int, bool]]):
        self.script = script
        self.calls = 0

    async def __call__(self, model_input, stop, *, max_tokens=None) -> TokensWithLogprobs:
        action = self.script[self.calls][0]
        self.calls += 1
        return TokensWithLogprobs(list(action), [-0.5] * len(action))


def _assert_stats_equal_replay(
    stats, traj, transitions, ref: ExtensionTracker, *, env_done: bool
) -> ExtensionTracker:
    """Replay ``ref`` over ``transitions`` (the last one ``acted`` when the env ended the episode)
    and assert the engine's stats equal the tracker's; returns the replayed tracker."""
    ref.start(transitions[0].ob if transitions else traj.final_ob)
    for i, t in enumerate(transitions):
        if i == len(transitions) - 1 and env_done:
            ref.acted(len(t.ac.tokens))
        else:
            nxt = transitions[i + 1].ob if i + 1 < len(transitions) else traj.final_ob
            ref.step(t.ac.tokens, nxt, i + 1, None)
    ref.close()
    assert stats.breaks == tuple(ref.breaks)
    assert (stats.datums, stats.tokens_trained, stats.tokens_unique, stats.tokens_per_turn) == (
        ref.datums,
        ref.tokens_trained,
        ref.tokens_unique,
        ref.tokens_per_turn,
    )
    return ref


@settings(max_examples=150, deadline=None)
@given(
    script=turns_st,
    mode=st.sampled_from([ExtensionCheck.FULL, ExtensionCheck.BOUNDARY]),
    max_turns=st.sampled_from([None, 1, 3]),
)
def test_inlined_turns_account_like_the_tracker(script, mode, max_turns):
    config = EngineConfig(extension_check=mode, boundary_window=2, limits=RolloutLimits(max_turns=max_turns))
    traj, stats = asyncio.run(run_episode(ScriptPolicy(script), ScriptEnv(script), config))

    transitions = traj.transitions
    ref = _assert_stats_equal_replay(
        stats, traj, transitions, ExtensionTracker(mode, 2), env_done=stats.stop_reason != "max_turns"
    )
    marked = [i for i, t in enumerate(transitions) if t.metrics.get("rollout/ext_break")]
    assert marked == [b.turn - 1 for b in ref.breaks]


class HangingPolicy(TokenCompleter):
    """The scripted action, except that call ``hang_at`` (1-based) never returns."""

    def __init__(self, hang_at: int):
        self.hang_at = hang_at
        self.calls = 0

    async def __call__(self, model_input, stop, *, max_tokens=None) -> TokensWithLogprobs:
        self.calls += 1
        if self.calls == self.hang_at:
            await asyncio.sleep(3600)
        return TokensWithLogprobs([7, 8, 2], [-0.5] * 3)


@pytest.mark.parametrize("hang_at", [1, 2, 5])
@pytest.mark.parametrize("break_at", [None, 2])
def test_a_deadline_inside_the_inlined_turns_leaves_the_tracker_exact(hang_at, break_at):
    """The rollout deadline cancels the loop between inlined turns (their stats are kept in
    locals): the stats still equal the tracker replayed over the kept transitions."""
    from rollout.testing import SyntheticEnv

    config = EngineConfig(limits=RolloutLimits(rollout_timeout_seconds=0.05))
    env = SyntheticEnv(20, break_at=break_at)
    traj, stats = asyncio.run(run_episode(HangingPolicy(hang_at), env, config))
    assert stats.stop_reason == "rollout_timeout" and stats.turns == hang_at - 1

    transitions = traj.transitions if stats.turns else []
    _assert_stats_equal_replay(
        stats, traj, transitions, ExtensionTracker(ExtensionCheck.FULL), env_done=False
    )
