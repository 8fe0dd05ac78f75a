"""The math env's thinking setting (``env.thinking``), its series of problems per episode
(``env.problems_per_episode``), the warm start it scripts, and a compacted run on the tiny model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest
from tinker_cookbook.renderers import Message
from tinker_cookbook.renderers.qwen3 import Qwen3Renderer

import training
from backend.model import SMOLLM2
from envs import PlayerPolicy
from envs.math import METRIC_CORRECT, MathDatasetBuilder, MathEnv, MathEnvConfig, MathProblem, ThinkingSolver
from envs.math.config import THINKING_INSTRUCTION
from envs.math.env import METRIC_THINKING, has_complete_thinking
from envs.math.train import MathTrainConfig
from renderers_ext import QWEN3_PRESERVE_THINKING, load_renderer
from rollout import EngineConfig, RolloutLimits, run_episode

TINY = "turngym/tiny-random-llama"
PROBLEMS = (
    MathProblem("What is 12 + 34?", "46", uid="a"),
    MathProblem("What is 50 - 7?", "43", uid="b"),
    MathProblem("What is 6 * 13?", "78", uid="c"),
)


def _play(env: MathEnv, player, config: EngineConfig | None = None):  # type: ignore[no-untyped-def]
    return anyio.run(run_episode, PlayerPolicy(env, player), env, config or EngineConfig())


def test_a_thinking_series_asks_every_problem_in_one_conversation() -> None:
    config = MathEnvConfig(thinking=True, problems_per_episode=3)
    env = MathEnv(load_renderer("qwen3", SMOLLM2), PROBLEMS[0], config, follow_ups=PROBLEMS[1:])
    traj, stats = _play(env, ThinkingSolver(PROBLEMS))
    assert stats.turns == 3 and sum(t.reward for t in traj.transitions) == pytest.approx(1.0)
    final = traj.transitions[-1].metrics
    assert final[METRIC_CORRECT] == 1.0 and final[METRIC_THINKING] == 1.0
    users = [m["content"] for m in env.messages if m["role"] == "user"]
    assert all(str(u).endswith(THINKING_INSTRUCTION) for u in users)
    assert users[-1] == f"Correct. Next question: {PROBLEMS[2].question}{THINKING_INSTRUCTION}"
    # the few-shot example thinks too
    assert has_complete_thinking(env.messages[1]) and config.max_turns == 3


def test_a_series_with_feedback_moves_on_after_the_attempts_and_averages_rewards() -> None:
    async def wrong(messages: list[Message]) -> Message:
        return {"role": "assistant", "content": "\\boxed{0}"}

    config = MathEnvConfig(problems_per_episode=2, max_attempts=2, fewshot=False)
    env = MathEnv(load_renderer(None, SMOLLM2), PROBLEMS[0], config, follow_ups=PROBLEMS[1:2])
    traj, stats = _play(env, wrong)
    assert stats.turns == 4  # two attempts at each of the two problems
    assert sum(t.reward for t in traj.transitions) == 0.0
    final = traj.transitions[-1].metrics
    assert final[METRIC_CORRECT] == 0.0 and final[METRIC_THINKING] == 0.0
    assert f"Incorrect, the answer was {PROBLEMS[0].answer}. Next question: {PROBLEMS[1].question}" in str(
        env.messages[4]["content"]
    )


def test_a_cut_reply_in_a_series_costs_the_format_term_and_the_series_goes_on() -> None:
    config = MathEnvConfig(problems_per_episode=3, fewshot=False)
    env = MathEnv(load_renderer(None, SMOLLM2), PROBLEMS[0], config, follow_ups=PROBLEMS[1:])
    traj, stats = _play(
        env, ThinkingSolver(PROBLEMS, thinking=False), EngineConfig(limits=RolloutLimits(max_turn_tokens=3))
    )
    assert stats.turns == 3  # every reply is cut, none ends the series
    assert all(t.reward < 0 for t in traj.transitions)


def test_series_episodes_never_share_a_problem() -> None:
    builder = MathDatasetBuilder(
        env=MathEnvConfig(problems_per_episode=3), n_train=20, n_test=7, batch_size=2
    )
    train, test = builder.datasets()
    assert train.n_groups == 6 and test is not None and test.n_groups == 2
    asked = [p.uid for k in range(train.n_groups) for p in train.series(k)]
    assert len(asked) == len(set(asked)) == 18
    group = train.get_batch(1)[0]
    assert (group.problem, *group.follow_ups) == train.series(2)


def test_thinking_envs_default_to_the_thinking_renderer() -> None:
    thinking = MathDatasetBuilder(env=MathEnvConfig(thinking=True), n_test=0, n_train=4, batch_size=1)
    plain = MathDatasetBuilder(n_test=0, n_train=4, batch_size=1)
    (env, *_) = anyio.run(thinking.datasets()[0].get_batch(0)[0].make_envs)
    (other, *_) = anyio.run(plain.datasets()[0].get_batch(0)[0].make_envs)
    assert type(env.renderer) is Qwen3Renderer  # type: ignore[attr-defined]
    assert type(other.renderer) is not Qwen3Renderer  # type: ignore[attr-defined]


def test_scripted_warm_start_episodes_split_as_the_renderer_and_compaction_say() -> None:
    """Six-problem thinking episodes: kept (preserve renderer) one sequence, compacted every 2
    turns three, stripped every turn (qwen3) six; the scripted tokens are the same each way."""
    env = MathEnvConfig(thinking=True, problems_per_episode=6, fewshot=False)
    found = {}
    for way, renderer_name, period in [
        ("kept", QWEN3_PRESERVE_THINKING, None),
        ("compact", None, 2),
        ("strip", None, None),
    ]:
        builder = MathDatasetBuilder(env=env, levels="1,2", n_train=40, renderer_name=renderer_name)
        assert isinstance(builder, training.SupportsScriptedEpisodes)
        episodes = anyio.run(builder.scripted_episodes, 3, 11)
        datums, metrics = anyio.run(
            training.scripted_datums, episodes, EngineConfig(compaction_period=period)
        )
        assert (
            metrics["warm_start/scripted_reward"] == pytest.approx(1.0)
            and metrics["warm_start/scripted_turns"] == 6
        )
        found[way] = (
            len(datums),
            metrics["warm_start/trained_tokens"],
            sum(len(d.model_input.to_ints()) for d in datums),
        )
    assert [found[w][0] for w in ("kept", "compact", "strip")] == [3, 9, 18]
    assert found["kept"][1] == found["compact"][1] == found["strip"][1]
    assert found["compact"][2] < found["strip"][2]  # compaction trains fewer tokens than stripping


def test_thinking_warm_start_then_two_compacted_rl_steps_on_the_tiny_model(tmp_path: Path) -> None:
    run = tmp_path / "run"
    config = training.parse_config(
        MathTrainConfig,
        [
            f"model_name={TINY}",
            "env.thinking=true",
            "env.problems_per_episode=3",
            "env.fewshot=false",
            "compaction_period=2",
            "warm_start.episodes=4",
            "warm_start.steps=2",
            "warm_start.batch_size=4",
            "max_steps=2",
            "data.levels=1",
            "max_tokens=64",
            "data.batch_size=1",
            "data.group_size=2",
            "data.n_train=8",
            "data.n_test=1",
            "eval_every=2",
            "save_every=0",
            "progress=false",
            f"log_path={run}",
        ],
    )
    summary = training.train(config)
    warm = json.loads((run / "warm_start.json").read_text())
    # 4 scripted 3-problem episodes, compacted every 2 turns: two sequences each
    assert warm["warm_start/episodes"] == 4 and warm["warm_start/datums"] == 8
    assert warm["warm_start/scripted_reward"] == pytest.approx(1.0) and warm["warm_start/scripted_turns"] == 3
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2  # (the random model's replies rarely parse: its series may end early)
    evals = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    assert [(e["step"], e["stage"]) for e in evals] == [(0, "untrained"), (0, "warm_start"), (2, "rl")]
    text = summary.describe()
    assert "held-out after the warm start" in text and "held-out after 2 RL steps" in text
    assert json.loads((run / "config.json").read_text())["compaction_period"] == 2


def test_the_docs_thinking_command_parses() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text()
    match = re.search(r"^python -m envs\.math\.train (env\.thinking=true.*)$", text, re.MULTILINE)
    assert match, "docs/training.md lost the thinking command"
    config = training.parse_config(MathTrainConfig, match.group(1).split())
    assert config.env.thinking and config.env.problems_per_episode == 6 and config.compaction_period == 3
    assert config.warm_start.episodes > 0
    assert isinstance(config.dataset_builder(), training.SupportsScriptedEpisodes)
