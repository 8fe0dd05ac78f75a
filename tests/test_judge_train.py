"""``envs.judge.train`` on the shared loop: defaults, bad values, one step on TINY with scripted judges."""

from __future__ import annotations

import anyio
import pytest

import envs.judge.testing  # noqa: F401  (registers the scripted: judge specs)
import training
from envs.judge import (
    SMALL_LOCAL_JUDGE,
    JudgeConfig,
    JudgeEnvConfig,
    JudgeEnvKind,
    PairingScheme,
    PairwiseGroupBuilder,
    RubricGroupBuilder,
)
from envs.judge.train import JudgeTrainConfig
from training._logging import read_rows


def test_defaults_use_the_embedded_model_as_policy_and_judge() -> None:
    config = training.parse_config(JudgeTrainConfig, [])
    assert config.model_name == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert config.env == JudgeEnvConfig() and config.judge == SMALL_LOCAL_JUDGE()  # no copies
    assert config.judge.completer == "local:HuggingFaceTB/SmolLM2-135M-Instruct"
    builder = config.dataset_builder()
    assert builder.env is config.env and builder.judge is config.judge
    assert builder.env.kind is JudgeEnvKind.RUBRIC and builder.judge.samples == 4
    train, test = anyio.run(builder)
    assert test is not None and len(test.get_batch(0)) == config.data.n_test
    group = train.get_batch(0)[0]
    assert isinstance(group, RubricGroupBuilder) and group.task.turns == 1  # multi_turn=False by default
    assert group.judge.reply_prefix == "Score: " and group.judge.max_tokens == 3  # the verdict's prefix


def test_judge_keys_compose_with_the_small_local_judge() -> None:
    config = training.parse_config(JudgeTrainConfig, ["judge.timeout_s=30", "judge.cache_path=/tmp/v.sqlite"])
    assert config.judge == SMALL_LOCAL_JUDGE(timeout_s=30.0, cache_path="/tmp/v.sqlite")
    plain = training.parse_config(
        JudgeTrainConfig, ["judge=envs.judge.config:JudgeConfig", "judge.completer=openai:judge-model"]
    )
    assert plain.judge == JudgeConfig("openai:judge-model")  # a real judge's budget: 256 tokens, greedy


def test_pairwise_multi_turn_keys() -> None:
    config = training.parse_config(
        JudgeTrainConfig,
        [
            "env.kind=pairwise",
            "env.pattern=round_robin",
            "env.multi_turn=true",
            "judge.completer=scripted:prefers_a",
            "env.user=scripted:reply:ok",
        ],
    )
    builder = config.dataset_builder()
    train, _ = anyio.run(builder)
    groups = [g for i in range(len(train)) for g in train.get_batch(i)]
    assert all(
        isinstance(g, PairwiseGroupBuilder) and g.pattern is PairingScheme.ROUND_ROBIN for g in groups
    )
    multi = [g for g in groups if isinstance(g, PairwiseGroupBuilder) and g.task.turns > 1]
    assert multi and all(g.user is not None and g.user.model.completer == "scripted:reply:ok" for g in multi)
    assert all(
        g.user is not None and g.user.model.reply_prefix == "" for g in multi
    )  # users are not prefilled
    assert all(g.judge.reply_prefix == "Preferred: " for g in groups)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["env.kind=ranking"], "bad value for env.kind"),
        (["env.pattern=swiss"], "bad value for env.pattern"),
        (["env.kind=pairwise", "data.group_size=1"], "pairwise needs data.group_size >= 2"),
        (["judge.samples=0"], "samples must be >= 1"),
        (["kind=pairwise"], "unknown key 'kind'"),
    ],
)
def test_bad_values_are_one_line_errors(argv: list[str], message: str) -> None:
    with pytest.raises(training.ConfigError, match=message):
        training.parse_config(JudgeTrainConfig, argv)


def test_one_step_on_the_tiny_model_writes_the_artifacts(tmp_path) -> None:
    config = training.parse_config(
        JudgeTrainConfig,
        [
            "model_name=turngym/tiny-random-llama",
            "judge.completer=scripted:score:6",
            f"log_path={tmp_path}",
            "max_steps=1",
            "eval_every=1",
            "data.batch_size=1",
            "data.group_size=2",
            "data.n_test=1",
            "max_tokens=8",
            "progress=False",
        ],
    )
    summary = training.train(config)
    assert summary.end_step == 1
    (row,) = read_rows(tmp_path / "metrics.jsonl")
    assert row["env/all/judge/calls"] == 1.0 and row["env/all/judge/fallback"] == 0.0
    evals = read_rows(tmp_path / "eval.jsonl")
    assert [r["step"] for r in evals] == [0, 1]
    assert (tmp_path / "reward_curve.png").is_file() and (tmp_path / "config.json").is_file()


def test_bad_task_file_is_one_line_before_the_model(tmp_path, capsys) -> None:
    from envs.judge.train import main

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"prompt": "Hi"}\n{"prompt": "Hello"\n')
    assert main([f"env.tasks_path={tasks}", f"log_path={tmp_path / 'run'}"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("envs.judge.train: error: ") and "tasks.jsonl:2: invalid JSON" in line
    assert not (tmp_path / "run").exists()
