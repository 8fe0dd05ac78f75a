"""MathEnv: rewards of the three games, calculator tool formats, one datum per episode, builders."""

from __future__ import annotations

import pickle

import anyio
import pytest
from tinker_cookbook.renderers.qwen3 import Qwen3InstructRenderer
from tinker_cookbook.rl.data_processing import trajectory_to_data
from tinker_cookbook.rl.rollouts import do_single_rollout
from tinker_cookbook.rl.types import EnvGroupBuilder

from backend.model import SMOLLM2
from completers import ScriptedTokenCompleter
from envs import METRIC_FAULT_PREFIX
from envs.math import (
    CalculatorMode,
    Grader,
    GraderConfig,
    MathDatasetBuilder,
    MathEnv,
    MathEnvConfig,
    MathGroupBuilder,
    MathProblem,
    generate_problems,
)
from envs.math.builders import MathRLDataset
from renderers_ext import load_renderer

PROBLEM = MathProblem("What is 12 * 12?", "144")
TOOL_CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "12*12"}}\n</tool_call>'


@pytest.fixture(scope="module")
def grader():
    with Grader(GraderConfig(workers=1, timeout_s=10.0)) as g:
        yield g


def _act(renderer, text: str) -> list[int]:
    return list(renderer.tokenizer.encode(text, add_special_tokens=False)) + list(
        renderer.get_stop_sequences()
    )


def _play(
    renderer, config: MathEnvConfig, replies: list[str], grader: Grader, problem: MathProblem = PROBLEM
):
    """Step the env through ``replies``; return (env, [StepResult...])."""

    async def main():
        env = MathEnv(renderer, problem, config, grader=grader)
        await env.initial_observation()
        results = []
        for text in replies:
            res = await env.step(_act(renderer, text))
            results.append(res)
            if res.episode_done:
                break
        return env, results

    return anyio.run(main)


@pytest.mark.parametrize(
    ("reply", "reward", "correct"),
    [
        ("12 * 12 = 144, so \\boxed{144}", 1.0, 1.0),
        ("\\boxed{144.0}", 1.0, 1.0),
        ("\\boxed{\\frac{288}{2}}", 1.0, 1.0),
        ("\\boxed{143}", 0.0, 0.0),
        ("it is 144", -0.1, 0.0),
    ],
)
def test_single_turn_reward(renderer, grader, reply, reward, correct):
    _, results = _play(renderer, MathEnvConfig(), [reply], grader)
    (res,) = results
    assert res.episode_done
    assert res.reward == pytest.approx(reward)
    assert res.metrics["math/correct"] == correct


def test_format_coef_scales_the_penalty(renderer, grader):
    _, (res,) = _play(renderer, MathEnvConfig(format_coef=0.3), ["no box"], grader)
    assert res.reward == pytest.approx(-0.3)


def test_truncated_reply_is_a_format_fault(renderer, grader):
    async def main():
        env = MathEnv(renderer, PROBLEM, MathEnvConfig(), grader=grader)
        await env.initial_observation()
        tokens = list(renderer.tokenizer.encode("\\boxed{144", add_special_tokens=False))
        return await env.step(tokens, extra={"stop_reason": "length"})

    res = anyio.run(main)
    assert res.episode_done and res.reward == pytest.approx(-0.1)
    assert any(k.startswith(METRIC_FAULT_PREFIX) for k in res.metrics)


def test_feedback_game_decays_reward_and_sends_feedback(renderer, grader):
    config = MathEnvConfig.preset("feedback", feedback="Nope, again.")
    env, results = _play(renderer, config, ["\\boxed{100}", "\\boxed{144}"], grader)
    assert [r.episode_done for r in results] == [False, True]
    assert results[0].reward == 0.0
    assert results[1].reward == pytest.approx(config.attempt_decay)
    assert results[1].metrics["math/attempts"] == 2.0
    assert env.messages[-2] == {"role": "user", "content": "Nope, again."}
    assert "Nope, again." in renderer.tokenizer.decode(results[0].next_observation.to_ints())


def test_feedback_game_ends_after_max_attempts(renderer, grader):
    config = MathEnvConfig.preset("feedback", max_attempts=2)
    _, results = _play(renderer, config, ["\\boxed{1}", "no box", "\\boxed{144}"], grader)
    assert len(results) == 2 and results[-1].episode_done
    assert results[-1].metrics["math/correct"] == 0.0
    assert results[-1].metrics["math/format"] == 0.5
    assert sum(r.reward for r in results) == pytest.approx(-0.1)


def test_feedback_episode_is_one_datum_with_qwen3_instruct(grader):
    renderer = load_renderer("qwen3_instruct", SMOLLM2)
    config = MathEnvConfig.preset("feedback", max_attempts=3)
    replies = ["I guess \\boxed{140}", "Maybe 145", "12 * 12 = 144. \\boxed{144}"]
    policy = ScriptedTokenCompleter(replies, renderer.tokenizer, stop_token=renderer.get_stop_sequences()[0])

    async def main():
        env = MathEnv(renderer, PROBLEM, config, grader=grader)
        return await do_single_rollout(policy, env)

    traj = anyio.run(main)
    assert len(traj.transitions) == 3
    assert [t.reward for t in traj.transitions] == pytest.approx([0.0, -0.1, 0.25])
    data = trajectory_to_data(traj, 1.0)
    assert len(data) == 1
    # the one datum holds every action: its length is the last observation + last action
    last = traj.transitions[-1]
    assert data[0].model_input.length == last.ob.length + len(last.ac.tokens) - 1


def test_calculator_tool_call_gets_a_tool_message(renderer, grader):
    config = MathEnvConfig.preset("calculator")
    env, results = _play(renderer, config, [TOOL_CALL, "So \\boxed{144}"], grader)
    assert env.calculator_mode is CalculatorMode.TOOL
    tool_msg = env.messages[-2]
    assert tool_msg["role"] == "tool" and tool_msg["content"] == "144"
    assert "<tool_response>\n144\n</tool_response>" in renderer.tokenizer.decode(
        results[0].next_observation.to_ints()
    )
    assert not results[0].episode_done and results[0].reward == 0.0
    assert results[1].reward == 1.0 and results[1].metrics["math/calculator_calls"] == 1.0


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("__import__('os').system('true')", "error: not allowed"),
        ("1/0", "error: division by zero"),
        ("9**9**9", "error: exponent exceeds"),
    ],
)
def test_calculator_rejects_unsafe_or_bad_input_with_an_error_result(renderer, grader, expression, expected):
    call = TOOL_CALL.replace("12*12", expression.replace('"', '\\"'))
    env, results = _play(renderer, MathEnvConfig.preset("calculator"), [call], grader)
    assert env.messages[-1]["content"].startswith(expected)
    assert results[0].metrics["math/calculator/errors"] == 1.0 and not results[0].episode_done


class _NoToolsRenderer(Qwen3InstructRenderer):
    """qwen3_instruct without a tool format (as many renderers are)."""

    def create_conversation_prefix_with_tools(self, tools, system_prompt=""):
        raise NotImplementedError


def test_calculator_tag_mode_on_a_renderer_without_tools(tokenizer, grader):
    renderer = _NoToolsRenderer(tokenizer)
    config = MathEnvConfig.preset("calculator")
    env, results = _play(renderer, config, ["Let me compute <calc>12 * 12</calc>", "\\boxed{144}"], grader)
    assert env.calculator_mode is CalculatorMode.TAG
    assert "<calc>" in env.messages[0]["content"]  # instructions in the system prompt
    assert env.messages[-2] == {"role": "user", "content": "<calc_result>144</calc_result>"}
    assert results[-1].reward == 1.0


def test_calculator_budget_is_enforced(renderer, grader):
    config = MathEnvConfig.preset("calculator", max_calculator_calls=1)
    env, results = _play(renderer, config, [TOOL_CALL, TOOL_CALL, "\\boxed{144}"], grader)
    assert env.messages[-4]["content"] == "144"
    assert env.messages[-2]["content"].startswith("error: calculator budget exhausted")
    assert results[-1].episode_done and results[-1].reward == 1.0


def test_tool_mode_requires_a_tool_renderer(tokenizer):
    with pytest.raises(ValueError, match="no tool format"):
        MathEnv(_NoToolsRenderer(tokenizer), PROBLEM, MathEnvConfig(calculator=CalculatorMode.TOOL))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"attempt_decay": 2.0}, "attempt_decay"),
        ({"format_coef": -1}, "format_coef"),
    ],
)
def test_bad_config_is_one_clear_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MathEnvConfig(**kwargs)


# --- builders --------------------------------------------------------------------------------


def test_dataset_batches_are_deterministic_and_picklable():
    problems = generate_problems(20, seed=3)
    config = MathEnvConfig.preset("feedback")
    a = MathRLDataset(problems, batch_size=4, group_size=2, env=config, seed=7)
    b = MathRLDataset(problems, batch_size=4, group_size=2, env=config, seed=7)
    c = MathRLDataset(problems, batch_size=4, group_size=2, env=config, seed=8)
    assert len(a) == 5
    assert a.get_batch(2) == b.get_batch(2)
    assert [g.problem for i in range(5) for g in a.get_batch(i)] != [
        g.problem for i in range(5) for g in c.get_batch(i)
    ]
    assert sorted(g.problem.uid for i in range(5) for g in a.get_batch(i)) == sorted(p.uid for p in problems)
    batch = a.get_batch(1)
    assert all(isinstance(g, EnvGroupBuilder) for g in batch)
    assert pickle.loads(pickle.dumps(batch)) == batch
    with pytest.raises(IndexError):
        a.get_batch(5)


def test_group_builder_makes_envs_after_pickling():
    builder = MathGroupBuilder(PROBLEM, MathEnvConfig(), group_size=3)
    copy = pickle.loads(pickle.dumps(builder))
    envs = anyio.run(copy.make_envs)
    assert len(envs) == 3 and all(isinstance(e, MathEnv) for e in envs)
    assert copy.logging_tags() == ["math", "level0"]


def test_chz_dataset_builder_gives_train_and_test_splits():
    builder = MathDatasetBuilder(
        batch_size=2, group_size=3, env=MathEnvConfig.preset("feedback", max_attempts=4), n_train=10, n_test=4
    )
    train, test = anyio.run(builder.__call__)
    assert len(train) == 5 and test is not None and len(test) == 1
    group = train.get_batch(0)[0]
    assert isinstance(group, MathGroupBuilder) and group.group_size == 3 and group.env.max_attempts == 4
    test_group = test.get_batch(0)[0]
    assert isinstance(test_group, MathGroupBuilder) and test_group.group_size == 1
    train_q = {g.problem.question for i in range(len(train)) for g in train.get_batch(i)}  # type: ignore[attr-defined]
    test_q = {g.problem.question for g in test.get_batch(0)}  # type: ignore[attr-defined]
    assert not train_q & test_q


def test_chz_dataset_builder_rejects_unknown_source():
    with pytest.raises(ValueError, match="source must be one of"):
        MathDatasetBuilder(source="nope")


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            '<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>',
            "error: unknown tool 'search'",
        ),
        ('<tool_call>\n{"name": "calculator", "arguments": {}}\n</tool_call>', "error: missing 'expression'"),
        ("<tool_call>\n{not json\n</tool_call>", "error: malformed tool call"),
    ],
)
def test_bad_tool_calls_get_an_error_result(renderer, grader, call, expected):
    env, results = _play(renderer, MathEnvConfig.preset("calculator"), [call], grader)
    assert env.messages[-1]["role"] == "tool"
    assert env.messages[-1]["content"].startswith(expected)
    assert not results[0].episode_done


@pytest.mark.parametrize("fewshot", [True, False])
def test_fewshot_example_precedes_the_question(renderer, fewshot):
    env = MathEnv(renderer, PROBLEM, MathEnvConfig(fewshot=fewshot))
    messages = env.initial_messages()
    assert messages[-1]["content"].startswith(PROBLEM.question)
    roles = [m["role"] for m in messages]
    assert roles == (["user", "assistant", "user"] if fewshot else ["user"])
    if fewshot:
        assert "\\boxed{12}" in messages[1]["content"]


def test_cookbook_group_rollout_on_a_pickled_group_builder(renderer):
    """The cookbook's own group rollout runs our builder (after a pickle round trip)."""
    from tinker_cookbook.rl.rollouts import do_group_rollout

    builder = pickle.loads(
        pickle.dumps(MathGroupBuilder(PROBLEM, MathEnvConfig.preset("feedback"), group_size=2))
    )
    replies = ["\\boxed{144}", "\\boxed{143}", "\\boxed{144}"]  # env 1 right at once; env 2 on its 2nd try
    policy = ScriptedTokenCompleter(replies, renderer.tokenizer, stop_token=renderer.get_stop_sequences()[0])
    group = anyio.run(do_group_rollout, builder, policy)
    totals = sorted(sum(t.reward for t in traj.transitions) for traj in group.trajectories_G)
    assert totals == pytest.approx([0.5, 1.0])
    assert all(len(trajectory_to_data(traj, 1.0)) == 1 for traj in group.trajectories_G)
