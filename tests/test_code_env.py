"""CodeEnv: the run_python tool through the real sandbox, rewards graded like math, tool formats,
bad calls, budgets, the extension property across tool turns, builders and the train CLI."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tinker_cookbook.renderers.qwen3 import Qwen3InstructRenderer

import training
from envs.code import (
    PROGRAMS,
    PYTHON_TOOL,
    CodeDatasetBuilder,
    CodeEnv,
    CodeEnvConfig,
    CodeGroupBuilder,
    Isolation,
    RunResult,
    RunStatus,
    Sandbox,
    SandboxConfig,
    SandboxLimits,
    ToolFormat,
    code_action_messages,
)
from envs.code.env import METRIC_FAILED_CALLS, METRIC_TOOL_CALLS, format_run
from envs.code.train import CodeTrainConfig
from envs.code.train import main as train_main
from envs.math import Grader, GraderConfig, MathProblem
from renderers_ext import check_extension

PROBLEM = MathProblem("What is 123 * 456?", "56088")
README = Path(__file__).resolve().parents[1] / "envs" / "code" / "README.md"


def call(code: str, name: str = "run_python") -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"code": code}}) + "\n</tool_call>"


@pytest.fixture(scope="module")
def grader():
    with Grader(GraderConfig(workers=1, timeout_s=10.0)) as g:
        yield g


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    return Sandbox(
        SandboxConfig(limits=SandboxLimits(timeout_s=2.0), tmp_dir=str(tmp_path_factory.mktemp("runs")))
    )


def _act(renderer, text: str) -> list[int]:
    return list(renderer.tokenizer.encode(text, add_special_tokens=False)) + list(
        renderer.get_stop_sequences()
    )


def _play(renderer, replies, *, grader, sandbox, config=None, problem=PROBLEM):
    """Step a CodeEnv through ``replies``; check the extension property on every turn the game
    goes on; return (env, [StepResult...])."""

    async def main():
        env = CodeEnv(renderer, problem, config or CodeEnvConfig(), grader=grader, sandbox=sandbox)
        obs, _ = await env.initial_observation()
        tokens = obs.to_ints()
        results = []
        for text in replies:
            action = _act(renderer, text)
            res = await env.step(action)
            results.append(res)
            if res.episode_done:
                break
            report = check_extension(tokens, action, res.next_observation, renderer.tokenizer)
            assert report.ok, str(report)
            tokens = res.next_observation.to_ints()
        return env, results

    return anyio.run(main)


def test_a_tool_call_runs_the_code_and_the_answer_is_graded(renderer, grader, sandbox):
    env, results = _play(
        renderer, [call("print(123 * 456)"), "So \\boxed{56088}"], grader=grader, sandbox=sandbox
    )
    first, last = results
    assert not first.episode_done and first.reward == 0.0
    assert first.metrics["code/calls"] == 1.0 and first.metrics["code/failed_calls"] == 0.0
    assert first.metrics["code/status/ok"] == 1.0
    tool = env.messages[-2]
    assert tool["role"] == "tool" and tool["content"] == "56088" and tool["name"] == "run_python"
    text = renderer.tokenizer.decode(first.next_observation.to_ints())
    assert text.endswith("<tool_response>\n56088\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert last.episode_done and last.reward == 1.0
    assert last.metrics["math/correct"] == 1.0
    assert last.metrics[METRIC_TOOL_CALLS] == 1.0 and last.metrics[METRIC_FAILED_CALLS] == 0.0
    assert "math/calculator_calls" not in last.metrics
    assert [r.status for r in env.runs] == [RunStatus.OK]


def test_the_prompt_declares_the_tool_and_shows_a_solved_example(renderer, grader, sandbox):
    env = CodeEnv(renderer, PROBLEM, CodeEnvConfig(), grader=grader, sandbox=sandbox)
    messages = env.initial_messages()
    assert '"name": "run_python"' in messages[0]["content"]
    assert any(m.get("tool_calls") for m in messages) and any(m["role"] == "tool" for m in messages)
    assert messages[-1] == {"role": "user", "content": PROBLEM.question + CodeEnvConfig().instruction}
    plain = CodeEnv(renderer, PROBLEM, CodeEnvConfig(fewshot=False), grader=grader, sandbox=sandbox)
    assert len(plain.initial_messages()) == 2


def test_failed_calls_show_the_error_and_are_counted(renderer, grader, sandbox):
    config = CodeEnvConfig(failed_call_cost=0.05, max_tool_calls=6)
    replies = [
        call("print(1/0)"),
        call("while True:\n    pass"),
        call("print(1)", name="search"),
        '<tool_call>\n{"name": "run_python", "arguments": {"cod": "print(1)"}}\n</tool_call>',
        "<tool_call>\n{not json\n</tool_call>",
        call("print(open('/etc/passwd').read())"),
        "\\boxed{1}",
    ]
    env, results = _play(renderer, replies, grader=grader, sandbox=sandbox, config=config)
    tools = [m["content"] for m in env.messages if m["role"] == "tool"][1:]  # [0] is the example's
    assert tools[0].endswith("ZeroDivisionError: division by zero") and "print(1/0)" in tools[0]
    assert tools[1] == "Error: time limit of 2 s exceeded (killed)"
    assert tools[2] == "Error: unknown tool 'search'; the tool is run_python"
    assert tools[3] == "Error: missing 'code' argument (a string)"
    assert tools[4].startswith("Error: malformed tool call")
    assert (
        tools[5]
        == "sandbox: blocked open('/etc/passwd')\nError: stopped by the sandbox: a forbidden operation"
    )
    assert [r.reward for r in results[:-1]] == [-0.05] * 6
    assert results[1].metrics["code/status/timeout"] == 1.0
    assert results[-1].metrics[METRIC_FAILED_CALLS] == 6.0 and results[-1].metrics[METRIC_TOOL_CALLS] == 6.0
    assert results[-1].reward == pytest.approx(0.0)  # wrong answer, boxed


def test_the_tool_budget_is_enforced(renderer, grader, sandbox):
    config = CodeEnvConfig(max_tool_calls=1)
    env, results = _play(
        renderer,
        [call("print(2)"), call("print(3)"), "\\boxed{56088}"],
        grader=grader,
        sandbox=sandbox,
        config=config,
    )
    assert env.messages[-2]["content"].startswith("Error: tool budget exhausted")
    assert len(env.runs) == 1 and results[-1].episode_done and results[-1].reward == 1.0
    assert env.limits.max_turns == config.max_turns == 3


def test_tag_format_on_a_renderer_without_tools(tokenizer, grader, sandbox):
    class NoTools(Qwen3InstructRenderer):
        def create_conversation_prefix_with_tools(self, tools, system_prompt=""):
            raise NotImplementedError

    renderer = NoTools(tokenizer)
    env, results = _play(
        renderer,
        ["Let me compute.\n```python\nprint(123 * 456)\n```", "\\boxed{56088}"],
        grader=grader,
        sandbox=sandbox,
    )
    assert env.tool_format is ToolFormat.TAG
    assert env.messages[-2] == {"role": "user", "content": "<output>\n56088\n</output>"}
    assert "```python" in env.messages[0]["content"]  # the instructions
    assert results[-1].reward == 1.0
    with pytest.raises(ValueError, match="no tool format"):
        CodeEnv(renderer, PROBLEM, CodeEnvConfig(tool_format=ToolFormat.TOOL))


def test_the_drawn_programs_cover_results_errors_limits_and_violations(sandbox):
    async def main():
        out = {}
        async with anyio.create_task_group() as tg:
            for program in PROGRAMS:

                async def one(p: str = program) -> None:
                    out[p] = await sandbox.run(p)

                tg.start_soon(one)
        return out

    results = anyio.run(main)
    statuses = {r.status for r in results.values()}
    assert {
        RunStatus.OK,
        RunStatus.ERROR,
        RunStatus.OUTPUT_LIMIT,
        RunStatus.VIOLATION,
    } <= statuses
    assert "MemoryError" in results["b = bytearray(10 * 1024**3)"].output
    assert results["print(6 * 7)"].output == "42\n"
    assert "\ufffd" in results[PROGRAMS[7]].output  # invalid UTF-8 output arrives replaced, not raised
    assert all(r.seconds < 30 for r in results.values())


@settings(max_examples=20, deadline=None)
@given(message=code_action_messages())
def test_drawn_action_messages_render_as_calls_or_answers(renderer, message):
    calls = message.get("tool_calls") or []
    for c in calls:
        assert c.function.name == "run_python" and isinstance(json.loads(c.function.arguments)["code"], str)
    assert calls or "\\boxed{" in message["content"]


def test_format_run_keeps_head_and_tail():
    long = RunResult(RunStatus.OK, "".join(f"{i}\n" for i in range(1000)), "exit status 0", exit_code=0)
    shown = format_run(long, 100)
    assert shown.startswith("0\n1\n") and shown.endswith("998\n999") and "characters cut" in shown
    assert len(shown) < 160
    assert format_run(RunResult(RunStatus.OK, "", "exit status 0", exit_code=0), 100) == "(no output)"
    killed = RunResult(RunStatus.OUTPUT_LIMIT, "xxx", "output exceeded 10 bytes (killed)", truncated=True)
    assert format_run(killed, 100) == "xxx\nError: output exceeded 10 bytes (killed)"


# --- properties, with an in-process sandbox double (the real one is tested above and in
# test_code_sandbox.py; here it would only slow hypothesis down) ---------------------------------
class EchoSandbox(Sandbox):
    """Answers every run at once: ok with the code reversed, or an error for code with 'fail'."""

    async def run(self, code: str) -> RunResult:
        if "fail" in code:
            return RunResult(RunStatus.ERROR, "Traceback...\nNameError: fail\n", "exit status 1", exit_code=1)
        return RunResult(RunStatus.OK, code[::-1] + "\n", "exit status 0", exit_code=0)


REPLIES = st.one_of(
    st.text(st.characters(blacklist_characters="<|"), max_size=30).map(call),
    st.sampled_from(["fail()", "print(1)", ""]).map(call),
    st.sampled_from(["\\boxed{56088}", "\\boxed{7}", "no idea", "```python\nprint(1)\n```"]),
    st.sampled_from(["<tool_call>\n{bad\n</tool_call>", call("x", name="other")]),
)


@settings(max_examples=60, deadline=None)
@given(replies=st.lists(REPLIES, min_size=1, max_size=8), cost=st.sampled_from([0.0, 0.1]))
def test_any_mix_of_calls_and_answers_keeps_the_prefix_and_the_books(renderer, grader, replies, cost):
    config = CodeEnvConfig(max_tool_calls=3, failed_call_cost=cost, max_attempts=2)
    env, results = _play(renderer, replies, grader=grader, sandbox=EchoSandbox(), config=config)
    assert len(results) <= config.max_turns
    assert env.tool_calls <= sum(1 for r in replies if "<tool_call>" in r)
    if results[-1].episode_done and METRIC_TOOL_CALLS in results[-1].metrics:
        assert results[-1].metrics[METRIC_TOOL_CALLS] == env.tool_calls
        assert results[-1].metrics[METRIC_FAILED_CALLS] == env.failed_calls
    total = sum(r.reward for r in results)
    assert -cost * env.failed_calls - 0.1 * 2 - 1e-9 <= total <= 1.0 + 1e-9


# --- builders and CLI ----------------------------------------------------------------------------
def test_builder_pickles_and_makes_envs(tmp_path):
    game = CodeEnvConfig(sandbox=SandboxConfig(limits=SandboxLimits(timeout_s=2.0)))
    builder = CodeDatasetBuilder(env=game, levels="1", n_train=8, n_test=2, batch_size=2, group_size=3)
    train, test = builder.datasets()
    group = train.get_batch(0)[0]
    assert isinstance(group, CodeGroupBuilder) and group.code_config.sandbox.limits.timeout_s == 2.0
    copy = pickle.loads(pickle.dumps(group))
    envs = anyio.run(copy.make_envs)
    assert len(envs) == 3 and all(isinstance(e, CodeEnv) for e in envs)
    assert envs[0].sandbox is envs[1].sandbox  # one process-wide sandbox per configuration
    assert envs[0].tools == [
        PYTHON_TOOL
    ]  # declared: the base parses malformed calls, the checker draws calls
    assert test is not None and len(test.get_batch(0)) == 2


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("env.tool_format=xml", "bad value for env.tool_format"),
        ("env.sandbox.isolation=docker", "bad value for env.sandbox.isolation"),
        ("env.max_tool_calls=-1", "max_tool_calls must be >= 0"),
        ("bogus=1", "bogus"),
    ],
)
def test_bad_train_keys_exit_2_with_one_line(capsys, key, message):
    assert train_main([key]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_train_config_builds_the_configured_game():
    argv = [
        "env.max_tool_calls=2",
        "env.failed_call_cost=0.1",
        "env.tool_format=tag",
        "env.sandbox.limits.timeout_s=3",
        "env.sandbox.isolation=landlock",
        "data.levels=2",
        "data.n_train=4",
        "data.n_test=1",
    ]
    config = training.parse_config(CodeTrainConfig, argv)
    train, _ = config.dataset_builder().datasets()
    game = train.get_batch(0)[0].code_config  # type: ignore[attr-defined]
    assert game.max_tool_calls == 2 and game.failed_call_cost == 0.1
    assert game.tool_format is ToolFormat.TAG and game.sandbox.isolation is Isolation.LANDLOCK
    assert game.sandbox.limits.timeout_s == 3.0


def test_the_check_command_plays_tool_turns_and_checks_extension_across_them(capsys):
    from envs.check import main as check_main

    status = check_main(["turngym/MathPython-v0", "--json", "--examples", "8", "--block-threshold", "5"])
    report = json.loads(capsys.readouterr().out)
    assert status == 0 and report["ok"], report
    stats = report["stats"]
    assert stats["tools"] == ["run_python"]
    assert stats["tool_calls"] > 0 and stats["malformed_tool_calls"] > 0
    assert stats["extension_turns_after_tool_calls"] > 0
    extension = next(r for r in report["results"] if r["check"] == "extension_property")
    assert extension["result"] == "pass" and "after tool calls" in extension["detail"]


def test_readme_example_runs(renderer):
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert blocks, "envs/code/README.md has no python block"
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    assert namespace["result"].output == "3628800\n"  # type: ignore[attr-defined]
