"""Property tests of the token-in/token-out env core and of training data built from it.

A ``ChatEnv`` subclass replays a hypothesis-drawn conversation (its replies are the scripted
user/system messages) and is driven by hypothesis-drawn actions:

2. with the renderer's own rendering of each assistant message as the action, every
   observation equals ``build_generation_prompt`` of the conversation so far (token-in/token-out
   = full render) and extends the previous observation + action whenever the renderer claims
   the property; with random action tokens (faults included) observations still extend
   whenever the property is claimed and the step is not faulty, and the rendered new messages
   are exactly how the full render renders them.
4. the cookbook's ``trajectory_to_data`` on the env's trajectories yields 1 datum with a
   preserving renderer, ceil(T/N) under compaction every N turns, T when stripping; each datum's
   mask marks exactly the sampled tokens and its tokens are the unique tokens, concatenated.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
import tinker
import torch
from hypothesis import given, note, settings
from hypothesis import strategies as st
from tinker_cookbook.completers import TokensWithLogprobs
from tinker_cookbook.renderers import Message, Renderer
from tinker_cookbook.rl.data_processing import trajectory_to_data
from tinker_cookbook.rl.types import InitialObservationOverflow, StepResult, Trajectory, Transition

from backend.model import SMOLLM2
from envs.core import METRIC_FAULT_PREFIX, ChatEnv, EnvLimits, Fault, FaultPolicy, Reply
from renderers_ext import (
    QWEN3_PRESERVE_THINKING,
    CompactingRenderer,
    check_extension,
    extension_expected,
    load_renderer,
    prompt_tokens,
)
from renderers_ext.testing import (
    ALPHABET,
    assistant_indices,
    conversations,
    describe_conversation,
    memoized_encode,
    role_colon_conversations,
    sampled_action,
    texts,
    token_actions,
)

PROPERTY = settings(max_examples=200, deadline=None)
BASES = {
    n: load_renderer(n, SMOLLM2) for n in ("qwen3_instruct", "qwen3", QWEN3_PRESERVE_THINKING, "role_colon")
}
TOK = BASES["qwen3"].tokenizer
IM_END = 2


@pytest.fixture(autouse=True, scope="module")
def _fast_encode():
    with memoized_encode(TOK):
        yield


class ReplayEnv(ChatEnv):
    """Answers the k-th assistant message with the k-th scripted reply; the last one ends."""

    def __init__(self, renderer: Renderer, initial: list[Message], replies: list[list[Message]], **kwargs):
        super().__init__(renderer, limits=EnvLimits(max_turns=len(replies) + 1), **kwargs)
        self._initial = initial
        self._replies = replies
        self._k = 0

    def initial_messages(self) -> list[Message]:
        return list(self._initial)

    async def on_message(self, message: Message) -> Reply:
        k = self._k
        self._k += 1
        if k + 1 >= len(self._replies):
            return Reply(done=True, reward=1.0)
        return Reply(messages=self._replies[k], reward=0.1 * k)


def split(conversation: list[Message]) -> tuple[list[Message], list[list[Message]], list[int]]:
    """(initial messages, replies after each assistant message, assistant indices)."""
    idxs = assistant_indices(conversation)
    bounds = [*idxs[1:], len(conversation)]
    replies = [conversation[i + 1 : j] for i, j in zip(idxs, bounds, strict=True)]
    return conversation[: idxs[0]], replies, idxs


@dataclass(frozen=True)
class Step:
    ob: list[int]
    action: list[int]
    result: StepResult
    messages: list[Message]
    """The env's conversation right after the step."""
    rerendered: bool
    """The env re-rendered its history at this step (``ChatEnv.rerenders`` went up)."""


async def play(
    env: ChatEnv, actions: Sequence[list[int]], extras: Sequence[dict] | None = None
) -> list[Step]:
    first = await env.initial_observation()
    assert not isinstance(first, InitialObservationOverflow)
    ob = first[0].to_ints()
    steps: list[Step] = []
    for i, action in enumerate(actions):
        extra = extras[i] if extras else None
        before = env.rerenders
        result = await env.step(action, extra=extra)  # type: ignore[arg-type]
        steps.append(Step(ob, list(action), result, list(env.messages), env.rerenders > before))
        if result.episode_done:
            break
        ob = result.next_observation.to_ints()
    return steps


def renderer_for(name: str, period: int) -> Renderer:
    return CompactingRenderer(BASES["qwen3"], period) if name == "compact" else BASES[name]


def strategy_for(name: str, **kwargs) -> st.SearchStrategy[list[Message]]:
    if name == "role_colon":
        return role_colon_conversations(**kwargs)
    return conversations(thinking=False if name == "qwen3_instruct" else None, **kwargs)


def _holds_literal_think(content: object) -> bool:
    """Whether a scripted message holds a literal "<think>"/"</think>" in a string or in any of
    its text/thinking parts (hypothesis found one in a text part)."""
    if isinstance(content, str):
        return "think>" in content
    if isinstance(content, list):
        return any(
            isinstance(part, dict)
            and any("think>" in str(part.get(key) or "") for key in ("text", "thinking"))
            for part in content
        )
    return False


# --- 2a. own renderings as actions: token-in/token-out == full render -------------------------


@pytest.mark.parametrize(
    "name", ["qwen3_instruct", QWEN3_PRESERVE_THINKING, "role_colon", "qwen3", "compact"]
)
@PROPERTY
@given(data=st.data(), period=st.integers(1, 3))
def test_own_renderings_give_full_render_observations(name: str, period: int, data: st.DataObject) -> None:
    renderer = renderer_for(name, period)
    conversation = data.draw(strategy_for(name, max_turns=5), label="conversation")
    initial, replies, idxs = split(conversation)
    actions = [sampled_action(renderer, conversation, i) for i in idxs]
    env = ReplayEnv(renderer, initial, replies)
    steps = asyncio.run(play(env, actions))
    note(describe_conversation(conversation))
    assert len(steps) == len(idxs)
    literal_think = any(_holds_literal_think(conversation[i]["content"]) for i in idxs)
    for k, step in enumerate(steps[:-1], start=1):  # k = turns completed after this step
        assert not any(key.startswith(METRIC_FAULT_PREFIX) for key in step.result.metrics), (
            step.result.metrics
        )
        ob = step.result.next_observation.to_ints()
        report = check_extension(step.ob, step.action, ob, TOK)
        expected = prompt_tokens(renderer, conversation[: idxs[k]])
        claimed = extension_expected(renderer, k, step.messages)
        assert step.rerendered != claimed
        if claimed:
            assert report.ok, str(report)
            # render_continuation(new messages) agrees with build_generation_prompt(all). (Not
            # comparable when a scripted string holds a literal "<think>" or "</think>": the parsed message then
            # differs from the script, e.g. compaction strips the script's inline block.)
            if not literal_think:
                assert ob == expected, str(check_extension(ob, [], expected, TOK))
        else:
            assert ob == prompt_tokens(renderer, step.messages)
    assert steps[-1].result.episode_done and "stop/completed" in steps[-1].result.metrics


# --- 2b. random action tokens -----------------------------------------------------------------


LENIENT = {
    f: FaultPolicy(reward=-1.0, end_episode=False)
    for f in (Fault.MALFORMED, Fault.INVALID_UTF8, Fault.TRUNCATED)
}


@pytest.mark.parametrize("name", ["qwen3_instruct", QWEN3_PRESERVE_THINKING, "role_colon", "compact"])
@PROPERTY
@given(data=st.data(), period=st.integers(1, 3))
def test_random_actions_extend_whenever_claimed(name: str, period: int, data: st.DataObject) -> None:
    renderer = renderer_for(name, period)
    stop = [IM_END] if name != "role_colon" else TOK.encode("\n\nUser:", add_special_tokens=False)
    interesting = [IM_END, *TOK.encode("<think>\n</think>\n\nUser:é", add_special_tokens=False)]
    n = data.draw(st.integers(1, 5), label="turns")
    actions = data.draw(
        st.lists(token_actions(TOK, max_size=12, stop=stop, interesting=interesting), min_size=n, max_size=n),
        label="actions",
    )
    extras = data.draw(
        st.lists(
            st.sampled_from([{"stop_reason": "stop"}, {"stop_reason": "length"}]), min_size=n, max_size=n
        ),
        label="extras",
    )
    replies = data.draw(
        st.lists(
            st.lists(
                st.builds(lambda t: {"role": "user", "content": t}, texts(max_size=12, long=False)),
                min_size=1,
                max_size=2,
            ),
            min_size=n,
            max_size=n,
        ),
        label="replies",
    )
    env = ReplayEnv(renderer, [{"role": "user", "content": "Play."}], replies, faults=LENIENT)
    steps = asyncio.run(play(env, actions, extras))
    for k, step in enumerate(steps, start=1):
        note(f"turn {k}: action {TOK.decode(step.action)!r} metrics {step.result.metrics}")
        if step.result.episode_done:
            break
        ob = step.result.next_observation.to_ints()
        truncated = f"{METRIC_FAULT_PREFIX}{Fault.TRUNCATED}" in step.result.metrics
        faulty = not truncated and any(key.startswith(METRIC_FAULT_PREFIX) for key in step.result.metrics)
        if faulty or not extension_expected(renderer, k, step.messages):
            assert step.rerendered
            assert ob == prompt_tokens(renderer, step.messages)
            continue
        report = check_extension(step.ob, step.action, ob, TOK)
        assert report.ok, str(report)
        assert not step.rerendered
        if truncated:  # closed with the end-of-turn token, then the new messages: checked above
            continue
        # The new messages are rendered exactly as the full render renders them.
        tail = ob[len(step.ob) + len(step.action) :]
        full = prompt_tokens(renderer, step.messages)
        assert tail and full[len(full) - len(tail) :] == tail, TOK.decode(tail)


# --- 4. trajectory_to_data on the env's trajectories -----------------------------------------


def _trajectory(steps: list[Step]) -> Trajectory:
    transitions = []
    for i, s in enumerate(steps):
        logprobs = [-(i + 1) - j / 1000 for j in range(len(s.action))]  # distinct, to check alignment
        transitions.append(
            Transition(
                ob=tinker.ModelInput.from_ints(s.ob),
                ac=TokensWithLogprobs(tokens=s.action, maybe_logprobs=logprobs),
                reward=s.result.reward,
                episode_done=s.result.episode_done,
                metrics=s.result.metrics,
            )
        )
    return Trajectory(transitions=transitions, final_ob=steps[-1].result.next_observation)


@pytest.mark.parametrize("mode", ["preserve", "compact", "strip"])
@PROPERTY
@given(
    period=st.integers(1, 4),
    conversation=conversations(
        min_turns=1,
        max_turns=8,
        thinking=True,
        thinking_text=st.text(ALPHABET, min_size=1, max_size=10).filter(
            lambda s: s.strip("\n") and "<think>" not in s
        ),
        text=texts(max_size=16, long=False),
    ),
)
def test_trajectory_to_data_datums_masks_and_tokens(
    mode: str, period: int, conversation: list[Message]
) -> None:
    renderer = {
        "preserve": BASES[QWEN3_PRESERVE_THINKING],
        "compact": CompactingRenderer(BASES["qwen3"], period),
        "strip": BASES["qwen3"],
    }[mode]
    initial, replies, idxs = split(conversation)
    actions = [sampled_action(renderer, conversation, i) for i in idxs]
    steps = asyncio.run(play(ReplayEnv(renderer, initial, replies), actions))
    T = len(steps)
    assert len(idxs) == T
    data = trajectory_to_data(_trajectory(steps), traj_advantage=0.5)
    expected_n = {"preserve": 1, "compact": math.ceil(T / period), "strip": T}[mode]
    note(describe_conversation(conversation))
    assert len(data) == expected_n

    # Segments: a new datum starts at every transition whose ob does not extend the last one.
    starts = [0] + [
        i for i in range(1, T) if not check_extension(steps[i - 1].ob, steps[i - 1].action, steps[i].ob).ok
    ]
    assert len(starts) == expected_n
    if mode == "compact":
        assert starts == list(range(0, T, period))
    for datum, s, e in zip(data, starts, [*starts[1:], T], strict=True):
        last = steps[e - 1]
        full = last.ob + last.action  # the unique tokens of the segment, in order
        inputs = datum.model_input.to_ints()
        targets = datum.loss_fn_inputs["target_tokens"].to_torch().tolist()
        assert inputs + targets[-1:] == full
        assert inputs[1:] == targets[:-1]
        mask = [0.0] * len(full)
        logprobs = [0.0] * len(full)
        for i in range(s, e):
            a = steps[i]
            assert full[len(a.ob) : len(a.ob) + len(a.action)] == a.action
            for j in range(len(a.action)):
                mask[len(a.ob) + j] = 1.0
                logprobs[len(a.ob) + j] = -(i + 1) - j / 1000
        assert datum.loss_fn_inputs["mask"].to_torch().tolist() == mask[1:]
        got_lp = datum.loss_fn_inputs["logprobs"].to_torch()
        assert torch.allclose(got_lp, torch.tensor(logprobs[1:], dtype=got_lp.dtype))
        adv = datum.loss_fn_inputs["advantages"].to_torch().tolist()
        assert adv == [0.5 * m for m in mask[1:]]
    assert sum(int(d.loss_fn_inputs["mask"].to_torch().sum()) for d in data) == sum(
        len(s.action) for s in steps
    )
