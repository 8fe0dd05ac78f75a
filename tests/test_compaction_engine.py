"""Periodic compaction through the engine, as a property: for any conversation with thinking and
any period N, a ``ChatEnv`` replaying it under ``EngineConfig(compaction_period=N)`` yields
datums (``rollout.assemble``) that

- contain every sampled token exactly once, in order, as their masked (trained) targets;
- start a new sequence only at window starts (after k completed turns with k % N == 0), and at
  every window start whose closing window had visible thinking to strip;
- match the engine's own accounting (breaks marked as compactions, ``datums``, tokens trained).
"""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.rl.types import Env, EnvGroupBuilder

from backend.model import SMOLLM2
from completers import ScriptedTokenCompleter
from envs.core import ChatEnv, EnvLimits, Reply
from renderers_ext import CompactingRenderer, load_renderer
from renderers_ext.testing import (
    ALPHABET,
    assistant_indices,
    conversations,
    describe_conversation,
    memoized_encode,
    sampled_action,
    texts,
    visible_thinking,
)
from rollout import AdvantageConfig, EngineConfig, RolloutEngine, assemble

QWEN3 = load_renderer("qwen3", SMOLLM2)  # strips history thinking every turn on its own
TOK = QWEN3.tokenizer


@pytest.fixture(autouse=True, scope="module")
def _fast_encode():
    with memoized_encode(TOK):
        yield


class ReplayEnv(ChatEnv):
    """Answers the k-th assistant message with the k-th scripted reply; the last one ends."""

    def __init__(self, renderer: Renderer, initial: list[Message], replies: list[list[Message]]):
        super().__init__(renderer, limits=EnvLimits(max_turns=len(replies) + 1))
        self._initial = initial
        self._replies = replies

    def initial_messages(self) -> list[Message]:
        return list(self._initial)

    async def on_message(self, message: Message) -> Reply:
        k = self.turn - 1
        if k + 1 >= len(self._replies):
            return Reply(done=True, reward=1.0)
        return Reply(messages=self._replies[k], reward=0.1 * k)


class OneEnv(EnvGroupBuilder):
    """A group of one pre-made env (kept, so the test can read its conversation)."""

    def __init__(self, env: Env):
        self.env = env

    async def make_envs(self) -> list[Env]:
        return [self.env]


def split(conversation: list[Message]) -> tuple[list[Message], list[list[Message]], list[int]]:
    idxs = assistant_indices(conversation)
    bounds = [*idxs[1:], len(conversation)]
    return conversation[: idxs[0]], [conversation[i + 1 : j] for i, j in zip(idxs, bounds, strict=True)], idxs


@settings(max_examples=150, deadline=None)
@given(
    period=st.integers(1, 4),
    conversation=conversations(
        min_turns=1,
        max_turns=8,
        thinking=None,
        thinking_text=st.text(ALPHABET, max_size=10).filter(lambda s: "<think>" not in s),
        text=texts(max_size=16, long=False, forbid=("<think>", "</think>")),
    ),
)
def test_engine_datums_hold_every_sampled_token_once_and_break_only_at_window_starts(
    period: int, conversation: list[Message]
) -> None:
    note(describe_conversation(conversation))
    initial, replies, idxs = split(conversation)
    actions = [sampled_action(CompactingRenderer(QWEN3, period), conversation, i) for i in idxs]
    env = ReplayEnv(QWEN3, initial, replies)
    engine = RolloutEngine(ScriptedTokenCompleter(actions, cycle=True), EngineConfig(compaction_period=period))
    result = anyio.run(engine.run_batch, [OneEnv(env)])
    (outcome,) = result.outcomes
    assert outcome.ok and outcome.group is not None, outcome.failure
    assert isinstance(env.renderer, CompactingRenderer) and env.renderer.period == period
    (traj,) = outcome.group.trajectories_G
    (stats,) = outcome.stats
    T = len(traj.transitions)
    assert len(idxs) == T

    datums = assemble([outcome.group], AdvantageConfig()).datums
    # every sampled token exactly once, in order, as a masked target
    trained: list[int] = []
    for d in datums:
        targets = d.loss_fn_inputs["target_tokens"].to_torch().tolist()
        mask = d.loss_fn_inputs["mask"].to_torch().tolist()
        trained += [t for t, m in zip(targets, mask, strict=True) if m > 0]
    assert trained == [tok for t in traj.transitions for tok in t.ac.tokens]

    # where each datum starts: the transitions whose observation does not extend the sequence
    starts = [0]
    seq = traj.transitions[0].ob.to_ints() + list(traj.transitions[0].ac.tokens)
    for i, t in enumerate(traj.transitions[1:], start=1):
        ob = t.ob.to_ints()
        if ob[: len(seq)] != seq:
            starts.append(i)
            seq = []
        seq = ob + list(t.ac.tokens)
    assert len(starts) == len(datums) == stats.datums
    window_starts = set(range(0, T, period))
    assert set(starts) <= window_starts
    produced = [m for m in env.messages if m["role"] == "assistant"]
    must_break = {k for k in range(period, T, period) if any(visible_thinking(m) for m in produced[k - period : k])}
    assert must_break <= set(starts)
    # the engine saw the same: one expected break per new datum, each a compaction
    assert [b.turn for b in stats.breaks] == starts[1:]
    assert all(b.expected and b.compaction for b in stats.breaks)
    assert stats.tokens_trained == sum(d.model_input.length + 1 for d in datums)
