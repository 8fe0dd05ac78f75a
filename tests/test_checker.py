"""The conformance checker: passes on every included env and the cookbook's own Twenty Questions,
fails with a precise message on each deliberately broken env; the CLI; the exported helpers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import broken_envs as broken
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tinker_cookbook.renderers import get_text_content
from tinker_cookbook.rl.types import EnvGroupBuilder, InitialObservationOverflow

import envs.judge.testing  # noqa: F401  (registers the scripted test judges)
from backend.model import SMOLLM2
from envs import EnvLimits, Fault, FaultPolicy, decode_action
from envs.check import TargetError, load_target, main
from envs.checker import ActionKind, CheckConfig, CheckName, Outcome, check_conformance
from envs.checker._strategies import env_actions, invalid_utf8_fragments, tool_call_messages
from envs.gym import ENV_IDS, env_source
from envs.testing import (
    assert_env_conforms,
    cookbook_twenty_questions,
    env_limits,
    fault_policies,
    tool_call_conversations,
)

OFFLINE = {"turngym/Judge-v0": {"completer": "scripted:score:7"}}
"""Per id, the keyword arguments that make an env instant and offline (Judge-v0: a scripted judge
instead of the embedded model's)."""


ROOT = Path(__file__).resolve().parents[1]
FAST = CheckConfig(examples=8, block_threshold_s=1.5)  # BlockingEnv blocks 2 s; shared CI boxes lag


# --- passes ------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_checker_passes_on_every_included_env(env_id: str) -> None:
    report = check_conformance(env_source(env_id, **OFFLINE.get(env_id, {})), FAST, target=env_id)
    assert report.ok, str(report)
    assert report.actions >= FAST.examples and report.crashes == 0
    assert report[CheckName.NO_RAISE].outcome == Outcome.PASS


def test_checker_passes_on_the_cookbooks_twenty_questions() -> None:
    report = assert_env_conforms(cookbook_twenty_questions, examples=6, block_threshold_s=5.0)
    assert report[CheckName.EXTENSION].outcome == Outcome.PASS  # qwen3_instruct claims it, it holds
    assert report[CheckName.PICKLE].outcome == Outcome.PASS


def test_reference_env_passes_every_check() -> None:
    report = check_conformance(broken.EchoGroup(), FAST)
    assert report[CheckName.TOOL_PROTOCOL].outcome == Outcome.SKIP  # no tools declared
    assert {r.outcome for r in report.results if r.check != CheckName.TOOL_PROTOCOL} == {Outcome.PASS}, str(report)
    assert [r.check for r in report.results] == list(CheckName)


@pytest.mark.parametrize(
    ("renderer_name", "period", "claims"),
    [
        ("qwen3_instruct", 0, True),
        ("turngym/qwen3_preserve_thinking", 0, True),
        ("role_colon", 0, True),
        ("qwen3", 2, True),  # compaction: extends inside each window, checked there only
        ("qwen3", 0, False),  # strips thinking every turn: claims nothing, so nothing is checked
    ],
)
def test_extension_check_follows_the_renderers_claim(renderer_name: str, period: int, claims: bool) -> None:
    builder = broken.EchoGroup(size=1, max_turns=6, renderer_name=renderer_name, compaction_period=period)
    report = check_conformance(builder, FAST)
    assert report.ok, str(report)
    assert report[CheckName.EXTENSION].outcome == (Outcome.PASS if claims else Outcome.SKIP)


# --- precise failures --------------------------------------------------------------------
BROKEN = [
    (broken.RaisingGroup(), CheckName.NO_RAISE, ["IndexError", "broken_envs.py", "action [] (empty)"]),
    (broken.UnpicklableGroup(), CheckName.PICKLE, ["field 'lock'", "cannot pickle '_thread.lock'"]),
    (
        broken.RerenderingGroup(),
        CheckName.EXTENSION,
        ["TurnCountingRenderer", "extension breaks at token", "⟦0"],
    ),
    (broken.BlockingGroup(), CheckName.NON_BLOCKING, ["blocked the event loop for", "turn 1"]),
    (broken.NanRewardGroup(), CheckName.FINITE_REWARDS, ["reward nan", "<|im_end|>"]),
    (broken.EndlessGroup(), CheckName.EPISODE_BUDGET, ["not over after 3 steps", "env.limits.max_turns"]),
    (broken.FlakyCleanupGroup(), CheckName.CLEANUP, ["second cleanup() call raised KeyError"]),
    (broken.ToolBugGroup("no_id"), CheckName.TOOL_PROTOCOL, ["a tool result without its tool_call_id", "lookup"]),
    (broken.ToolBugGroup("user_role"), CheckName.TOOL_PROTOCOL, ["sent back with the 'user' role"]),
    (broken.ToolBugGroup("unanswered"), CheckName.TOOL_PROTOCOL, ["left unanswered while the game goes on"]),
    (broken.SharedShelfGroup(), CheckName.GROUP_ISOLATION, ["envs of a group share state", "after env 0"]),
    (broken.ForeverGroup(), CheckName.EPISODE_BUDGET, ["not over after 200 steps", "max_episode_steps=200"]),
]


@pytest.mark.parametrize(("builder", "check", "fragments"), BROKEN, ids=[c for _, c, _ in BROKEN])
def test_checker_fails_precisely_on_broken_envs(
    builder: EnvGroupBuilder, check: CheckName, fragments: list[str]
) -> None:
    report = check_conformance(builder, FAST)
    assert not report.ok
    assert [r.check for r in report.failures] == [check], str(report)
    detail = report[check].detail
    if check in (CheckName.TOOL_PROTOCOL, CheckName.GROUP_ISOLATION, CheckName.EPISODE_BUDGET):
        assert "\n" not in detail  # one line
    for fragment in fragments:
        assert fragment in detail, detail


def test_tool_and_isolation_checks_pass_on_correct_tool_envs() -> None:
    for builder in (broken.ToolGroup(), broken.SharedShelfGroup(shared=False)):
        report = check_conformance(builder, FAST)
        assert report.ok, str(report)
        assert report[CheckName.TOOL_PROTOCOL].outcome == Outcome.PASS, str(report)
    assert report[CheckName.GROUP_ISOLATION].outcome == Outcome.PASS, str(report)


def test_a_hanging_step_is_reported_not_waited_for() -> None:
    report = check_conformance(broken.HangingGroup(), CheckConfig(examples=2, step_timeout_s=0.5))
    assert [r.check for r in report.failures] == [CheckName.NO_RAISE]
    assert "did not return within 0.5s (a hang)" in report[CheckName.NO_RAISE].detail
    assert report.crashes == 1  # fail-fast: one hang, then no more episodes


def test_blocking_threshold_is_respected() -> None:
    lenient = check_conformance(
        broken.BlockingGroup(), CheckConfig(examples=1, scripted_episodes=1, block_threshold_s=10.0)
    )
    assert lenient.ok, str(lenient)


def test_assert_env_conforms_raises_with_the_check_and_tolerates_skips() -> None:
    with pytest.raises(AssertionError, match="step_never_raises: step raised IndexError"):
        assert_env_conforms(broken.RaisingGroup(), examples=4)
    report = assert_env_conforms(
        broken.UnpicklableGroup(), examples=4, tolerate=(CheckName.PICKLE,), block_threshold_s=5.0
    )
    assert report[CheckName.PICKLE].outcome == Outcome.FAIL


def test_checker_runs_inside_a_running_event_loop() -> None:
    async def main_() -> bool:
        return check_conformance(broken.EchoGroup(), CheckConfig(examples=3, block_threshold_s=5.0)).ok

    assert asyncio.run(main_())


def test_bad_source_fails_make_envs() -> None:
    def raises(seed: int) -> EnvGroupBuilder:
        raise RuntimeError(f"no such problem {seed}")

    report = check_conformance(raises, FAST)
    assert [r.check for r in report.failures] == [CheckName.MAKE_ENVS]
    assert "RuntimeError: no such problem 0" in report[CheckName.MAKE_ENVS].detail


# --- CLI ---------------------------------------------------------------------------------
def test_cli_passes_and_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["broken_envs:EchoGroup", "--examples", "3", "--block-threshold", "5"]) == 0
    out = capsys.readouterr().out
    assert "step_never_raises" in out and "pass" in out and "broken_envs:EchoGroup: OK" in out


def test_cli_takes_a_registered_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["turngym/Math-v0", "--json", "--examples", "3", "--block-threshold", "5"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] == "turngym/Math-v0"


def test_cli_json_and_exit_code_on_failure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["broken_envs:RaisingGroup", "--json", "--examples", "3", "--block-threshold", "5"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["target"] == "broken_envs:RaisingGroup"
    results = {r["check"]: r for r in data["results"]}
    assert results["step_never_raises"]["result"] == "fail"
    assert results["builder_pickles"]["result"] == "pass"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nosuch:Thing", "cannot import module 'nosuch'"),
        ("envs.core", "expected module:attribute"),
        ("envs.core:Nope", "has no attribute 'Nope'"),
        ("envs.core:ChatEnv", "is an Env class"),
        ("envs.core:METRIC_FAULT_PREFIX", "expected an EnvGroupBuilder"),
        ("broken_envs:Tiny", "has no attribute"),
        ("turngym/Nope-v0", "unknown id 'turngym/Nope-v0'"),
    ],
)
def test_cli_bad_target_is_one_line(target: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err


def test_load_target_instantiates_builder_classes_and_dataset_builders() -> None:
    assert isinstance(load_target("broken_envs:EchoGroup"), broken.EchoGroup)
    dataset = load_target("envs.twenty_questions:TwentyQuestionsDatasetBuilder")
    assert len(dataset) > 0 and isinstance(dataset.get_batch(0)[0], EnvGroupBuilder)
    with pytest.raises(TargetError, match="with no arguments"):
        load_target("envs.math:MathGroupBuilder")


def test_cli_as_a_module_exit_code() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "envs.check", "nosuch:Thing"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: cannot import module 'nosuch': No module named 'nosuch'"


# --- exported strategies -----------------------------------------------------------------
_BY_KIND: dict[ActionKind, st.SearchStrategy[list[int]]] = {}
_VOCAB = 49157  # len() of the embedded SmolLM2 tokenizer (added tokens included)


LOOKUP = {
    "name": "lookup",
    "description": "Stock of an item.",
    "parameters": {
        "type": "object",
        "properties": {"item": {"type": "string"}, "count": {"type": "integer", "minimum": 0}},
        "required": ["item"],
    },
}


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_env_actions_cover_every_kind(renderer, data: st.DataObject) -> None:  # type: ignore[no-untyped-def]
    tokenizer = renderer.tokenizer
    kind = data.draw(st.sampled_from(list(ActionKind)))
    if kind not in _BY_KIND:
        _BY_KIND[kind] = env_actions(
            tokenizer,
            [2],
            max_length=32,
            kinds=[kind],
            renderer=renderer,
            tools=[LOOKUP],
            messages=st.just({"role": "assistant", "content": "my own"}),
        )
    action = data.draw(_BY_KIND[kind])
    assert all(0 <= t < _VOCAB for t in action)
    assert 2 not in action[:-1]  # a sampler stops at the first stop token
    message, fault = decode_action(renderer, action)
    if kind == ActionKind.EMPTY:
        assert action == []
    elif kind == ActionKind.STOP_ONLY:
        assert action == [2]
    elif kind == ActionKind.MAX_LENGTH:
        assert len(action) == 32
    elif kind == ActionKind.INVALID_UTF8:
        assert "\ufffd" in tokenizer.decode(action) and action[-1] == 2
    elif kind == ActionKind.WELL_FORMED:
        assert action[-1] == 2
    elif kind == ActionKind.TOOL_CALL:
        assert fault is None and message is not None and message["tool_calls"]
    elif kind == ActionKind.MALFORMED_TOOL_CALL:
        assert fault == Fault.MALFORMED_TOOL_CALL
    elif kind == ActionKind.MESSAGE:
        assert fault is None and message is not None and get_text_content(message) == "my own"


def test_tool_call_arguments_fit_the_schema_mostly(renderer) -> None:  # type: ignore[no-untyped-def]
    fits = Counter()

    @settings(max_examples=60, deadline=None, database=None)
    @given(message=tool_call_messages([LOOKUP]))
    def draw(message) -> None:  # type: ignore[no-untyped-def]
        for call in message["tool_calls"]:
            args = json.loads(call.function.arguments)
            ok = call.function.name == "lookup" and isinstance(args.get("item"), str)
            ok = ok and (not isinstance(args.get("count"), int) or args["count"] >= 0)
            fits[ok] += 1

    draw()
    assert fits[True] > fits[False] > 0  # mostly well-shaped, some wrong arguments or tool names


def test_invalid_utf8_fragments_are_invalid(tokenizer) -> None:  # type: ignore[no-untyped-def]
    assert len(tokenizer) == _VOCAB
    fragments = invalid_utf8_fragments(tokenizer)
    assert fragments
    assert all("\ufffd" in tokenizer.decode(f) for f in fragments)


@settings(max_examples=40, deadline=None)
@given(conversation=tool_call_conversations(thinking=False))
def test_tool_call_conversations_render(renderer, conversation) -> None:  # type: ignore[no-untyped-def]
    assert conversation[0]["role"] == "user" and conversation[-1]["role"] == "assistant"
    calls = [c for m in conversation for c in m.get("tool_calls", [])]
    tool_ids = [m["tool_call_id"] for m in conversation if m["role"] == "tool"]
    assert tool_ids == [c.id for c in calls]
    tokens = renderer.build_generation_prompt(conversation[:-1]).to_ints()
    for call in calls:
        assert call.function.name in renderer.tokenizer.decode(tokens)


@settings(max_examples=30, deadline=None)
@given(limits=env_limits(max_turns=3), faults=fault_policies())
def test_env_configs_drive_a_chat_env(limits: EnvLimits, faults: dict[Fault, FaultPolicy]) -> None:
    async def play() -> None:
        env = broken.EchoEnv()
        env.limits, env.faults = limits, faults
        first = await env.initial_observation()
        if isinstance(first, InitialObservationOverflow):
            assert limits.max_trajectory_tokens is not None and limits.max_trajectory_tokens < 64
            return
        result = await env.step([])  # an empty sample: the EMPTY fault's policy applies
        assert result.episode_done and result.metrics["turngym/fault/empty"] == 1.0
        assert result.reward == faults.get(Fault.EMPTY, FaultPolicy()).reward

    asyncio.run(play())


# --- never vacuous (#17 item 5) ----------------------------------------------------------
def test_an_env_without_a_visible_renderer_is_not_ok_until_one_is_given() -> None:
    report = check_conformance(broken.HiddenRendererGroup(), FAST)
    assert not report.ok and report.actions == 0
    assert report[CheckName.NO_RAISE].outcome == Outcome.NOT_RUN
    assert "--renderer NAME" in report[CheckName.NO_RAISE].detail
    assert "not run" in report.summary()
    with pytest.raises(AssertionError, match=r"step_never_raises \(not run\): no tokenizer"):
        assert_env_conforms(broken.HiddenRendererGroup(), examples=3)
    given_renderer = assert_env_conforms(
        broken.HiddenRendererGroup(), examples=4, renderer="qwen3_instruct", block_threshold_s=5.0
    )
    assert given_renderer.actions > 0
    assert given_renderer[CheckName.EXTENSION].outcome == Outcome.PASS  # the given renderer's claim


def test_cli_renderer_flag_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    common = ["broken_envs:HiddenRendererGroup", "--json", "--examples", "3", "--block-threshold", "5"]
    assert main(common) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["actions"] == 0
    assert {r["result"] for r in data["results"] if r["check"] == "step_never_raises"} == {"not_run"}
    assert main([*common, "--renderer", "qwen3_instruct"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main([*common, "--model", SMOLLM2]) == 0  # the model's recommended renderer
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main([*common, "--renderer", "qwen3_instruct", "--model", "no-such/model"]) == 2
    assert "cannot make renderer 'qwen3_instruct'" in capsys.readouterr().err
    assert main([*common, "--allow-skip", "nope"]) == 2
    assert "unknown check 'nope'" in capsys.readouterr().err


def test_a_not_run_check_can_be_allowed_explicitly() -> None:
    config = CheckConfig(examples=3, block_threshold_s=5.0, allow_skip=frozenset(CheckName))
    report = check_conformance(broken.HiddenRendererGroup(), config)
    assert report.ok and report[CheckName.NO_RAISE].outcome == Outcome.SKIP
    assert report[CheckName.NO_RAISE].detail.startswith("not run (allowed): no tokenizer")


# --- tool envs (#19 item 1) ----------------------------------------------------------------
def test_a_tool_env_plays_multi_turn_tool_episodes_and_checks_extension_across_them() -> None:
    report = assert_env_conforms(broken.ToolGroup(), examples=12, block_threshold_s=5.0)
    stats = report.stats
    assert stats["tools"] == ["lookup"]
    assert stats["tool_calls"] > 0 and stats["malformed_tool_calls"] > 0
    assert stats["extension_turns_after_tool_calls"] > 0 and stats["multi_turn_steps"] > 0
    assert report[CheckName.EXTENSION].outcome == Outcome.PASS
    assert "after tool calls" in report[CheckName.EXTENSION].detail
    assert "tool_calls=" in report.summary()


def test_an_undeclared_tool_env_is_not_ok_and_says_why() -> None:
    report = check_conformance(broken.ToolGroup(declare=False), FAST)
    assert report.stats["tool_calls"] == 0
    assert [r.check for r in report.failures] == [CheckName.EXTENSION]
    assert report[CheckName.EXTENSION].outcome == Outcome.NOT_RUN
    assert "declare the tools it answers" in report[CheckName.EXTENSION].detail
    # the author's tools, given to the checker, make it run
    given_tools = assert_env_conforms(
        broken.ToolGroup(declare=False), examples=6, tools=[broken.LOOKUP_TOOL], block_threshold_s=5.0
    )
    assert given_tools.stats["tool_calls"] > 0


def test_lag_monitor_leaves_out_garbage_collection_pauses() -> None:
    """A pause inside a garbage collection is the runtime's, not the env's: not counted as
    blocking; the same pause outside one is."""
    import time

    from envs.checker._run import _LagMonitor

    monitor = _LagMonitor(interval=0.0)
    monitor._last = time.monotonic()
    monitor._on_gc("start", {})
    time.sleep(0.2)  # stands for a long collection
    monitor._on_gc("stop", {})
    monitor._tick()
    assert monitor.max_gap < 0.1
    time.sleep(0.2)  # the env blocking the loop
    monitor._tick()
    assert monitor.max_gap >= 0.15
