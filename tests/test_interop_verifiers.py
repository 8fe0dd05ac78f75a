"""verifiers environments through the adapter (envs.interop.verifiers): the two built in code
(envs.interop.verifiers_examples; one multi-turn, one with tools) pass the checker, their
own ``run()`` drives the conversation with the policy's sampled tokens, tool calls are answered
in the tool role, the task's ``@vf.reward`` hooks give the reward, and failures are one line."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest
from tinker_cookbook.renderers import Message, ToolCall
from tinker_cookbook.rl.types import Env

from envs.checker import CheckConfig, CheckName, Outcome, check_conformance
from envs.interop.verifiers import VerifiersEnv, VerifiersError, VerifiersGroup, load_spec, verifiers_source
from renderers_ext import render_action


@pytest.mark.parametrize("env_id", ["verifiers:arith-retry", "verifiers:calculator"])
def test_the_checker_passes_on_the_built_in_verifiers_envs(env_id: str) -> None:
    from envs.check import load_target

    assert load_target("verifiers:arith-retry")(2) == VerifiersGroup("verifiers:arith-retry", index=2)
    report = check_conformance(verifiers_source(env_id, group_size=2), CheckConfig(examples=6), target=env_id)
    assert report.ok, str(report)
    assert report[CheckName.EXTENSION].outcome == Outcome.PASS
    assert report[CheckName.GROUP_ISOLATION].outcome == Outcome.PASS


def _play(env: Env, moves: list[dict[str, Any]]) -> list[tuple[bool, float, dict]]:
    assert isinstance(env, VerifiersEnv)

    async def run() -> list[tuple[bool, float, dict]]:
        await env.initial_observation()
        out = []
        for move in moves:
            before = env.observation_tokens
            result = await env.step(render_action(env.renderer, cast(Message, {"role": "assistant", **move})))
            if not result.episode_done:  # token-in/token-out
                assert result.next_observation.to_ints()[: len(before)] == before
            out.append((result.episode_done, result.reward, dict(result.metrics)))
            if result.episode_done:
                break
        return out

    return anyio.run(run)


def test_the_env_s_own_run_drives_a_multi_turn_episode() -> None:
    env = anyio.run(VerifiersGroup("verifiers:arith-retry", index=0).make_envs)[0]
    assert isinstance(env, VerifiersEnv)
    answer = env.task.data.answer
    out = _play(env, [{"content": "5"}, {"content": "no idea"}, {"content": f"It is {answer}."}])
    assert [done for done, _, _ in out] == [False, False, True]
    assert (
        out[-1][1] == 1.0 and out[-1][2]["verifiers/correct"] == 1.0 and out[-1][2]["verifiers/tries"] == 3.0
    )
    users = [m["content"] for m in env.messages if m["role"] == "user"]
    assert users[1:] == [
        "5 is not right. Try again: answer with one number.",
        "That is not a number. Try again: answer with one number.",
    ]
    # three wrong tries: run() ends the exchange and the task's reward is 0
    env = anyio.run(VerifiersGroup("verifiers:arith-retry", index=1).make_envs)[0]
    out = _play(env, [{"content": "1"}, {"content": "2"}, {"content": "3"}, {"content": "4"}])
    assert len(out) == 3 and out[-1][:2] == (True, 0.0)


def test_tool_calls_are_answered_by_the_task_s_toolset() -> None:
    env = anyio.run(VerifiersGroup("verifiers:calculator", index=2).make_envs)[0]
    assert isinstance(env, VerifiersEnv)
    assert sorted(t["name"] for t in env.tools) == ["add", "multiply"]
    call = ToolCall(id="c1", function=ToolCall.FunctionBody(name="add", arguments='{"a": 40, "b": 2}'))
    out = _play(env, [{"content": "", "tool_calls": [call]}, {"content": str(env.task.data.answer)}])
    asked, answered = env.messages[-3], env.messages[-2]  # then the final answer
    call_id = asked.get("tool_calls", [])[0].id
    assert answered == {"role": "tool", "content": "42", "tool_call_id": call_id, "name": "add"}
    assert out[0][0] is False and out[1][:2] == (True, 1.0)
    assert out[1][2]["verifiers/tool_results"] == 1.0  # the trace saw the tool result


def test_an_episode_cut_by_turngym_s_budget_ends_verifiers_side_too() -> None:
    builder = VerifiersGroup("verifiers:arith-retry", index=0, max_turns=1)
    env = anyio.run(builder.make_envs)[0]
    assert isinstance(env, VerifiersEnv)

    async def run() -> bool:
        await env.initial_observation()
        result = await env.step(render_action(env.renderer, {"role": "assistant", "content": "0"}))
        assert result.episode_done  # max_turns
        runner = env._runner
        await builder.cleanup()
        return runner is not None and runner.done()

    assert anyio.run(run)


def test_bad_ids_and_a_failing_run_are_one_line() -> None:
    with pytest.raises(VerifiersError, match="needs a download from the Environments Hub"):
        load_spec("verifiers:primeintellect/wordle")
    with pytest.raises(VerifiersError, match="unknown verifiers env 'nope'"):
        verifiers_source("verifiers:nope")
    env = anyio.run(VerifiersGroup("verifiers:arith-retry").make_envs)[0]
    assert isinstance(env, VerifiersEnv)
    env.spec = type(env.spec)(env.spec.taskset, env.spec.env_cls, None)  # run() reads config.tries

    with pytest.raises(VerifiersError, match=r"^ArithTask: run\(\) failed: AttributeError") as error:
        _play(env, [{"content": "1"}])
    assert "\n" not in str(error.value)


def test_gym_make_by_id_and_gymnasium_check_env_through_the_adapter() -> None:
    import warnings

    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    from envs.gym import TokenEnv
    from envs.interop.verifiers import register_verifiers

    assert register_verifiers() == ["verifiers/arith-retry", "verifiers/calculator"]
    env = gym.make("verifiers/calculator", render_mode="ansi").unwrapped
    assert isinstance(env, TokenEnv)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env)
        messages = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]
        assert not messages, messages
    finally:
        env.close()
