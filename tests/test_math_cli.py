"""envs.math.train / envs.math.eval: command lines, the evaluation loop, a tiny end-to-end run."""

from __future__ import annotations

import json

import anyio
import pytest

import training
from completers import ScriptedTokenCompleter
from envs.math import Grader, GraderConfig, MathEnv, MathEnvConfig, MathProblem
from envs.math.eval import evaluate_policy, summarize
from envs.math.eval import main as eval_main
from envs.math.train import MathTrainConfig
from envs.math.train import main as train_main

TINY = "turngym/tiny-random-llama"


def test_bad_keys_exit_2_with_one_line(capsys):
    assert train_main(["bogus=1"]) == 2
    assert eval_main(["bogus=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("bogus" in line for line in err)


def test_train_config_builds_the_configured_game():
    config = training.parse_config(
        MathTrainConfig, ["env.max_attempts=4", "data.levels=4", "data.n_train=8", "data.n_test=2", "data.batch_size=2"]
    )
    train, test = config.dataset_builder().datasets()
    group = train.get_batch(0)[0]
    assert group.env.max_attempts == 4  # type: ignore[attr-defined]
    assert {g.problem.level for g in train.get_batch(0)} == {4}  # type: ignore[attr-defined]
    assert test is not None and len(test.get_batch(0)) == 2


def test_evaluate_policy_scores_episodes(renderer):
    problems = [
        MathProblem("q1", "5", uid="a"),
        MathProblem("q2", "6", uid="b"),
        MathProblem("q3", "5", uid="c"),
    ]
    policy = ScriptedTokenCompleter(
        ["so \\boxed{5}"], renderer.tokenizer, stop_token=renderer.get_stop_sequences()[0], cycle=True
    )

    async def main():
        with Grader(GraderConfig(workers=1)) as grader:
            envs = [MathEnv(renderer, p, MathEnvConfig(), grader=grader) for p in problems]
            return await evaluate_policy(policy, envs, problems, concurrency=2)

    records = anyio.run(main)
    assert [(r.uid, r.correct, r.extracted) for r in records] == [
        ("a", True, "5"),
        ("b", False, "5"),
        ("c", True, "5"),
    ]
    summary = summarize(records, 1.0, 0, {})
    assert summary.accuracy == pytest.approx(2 / 3)
    assert summary.format_rate == 1.0 and summary.mean_attempts == 1.0
    assert summary.mean_reward == pytest.approx(2 / 3)


def test_tiny_train_then_eval_end_to_end(tmp_path):
    run = tmp_path / "run"
    args = [
        f"model_name={TINY}",
        "backend=local",
        "max_steps=1",
        "max_tokens=4",
        "data.batch_size=1",
        "data.group_size=2",
        "data.n_train=4",
        "data.n_test=2",
        "eval_every=0",
        "progress=False",
        f"log_path={run}",
    ]
    assert train_main(args) == 0
    assert (run / "metrics.jsonl").is_file() and (run / "checkpoints.jsonl").is_file()
    assert eval_main([f"run={run}", f"model_name={TINY}", "n_test=2", "max_tokens=4"]) == 0
    results = json.loads((run / "math_eval.json").read_text())
    assert results["summary"]["n"] == 2 and len(results["episodes"]) == 2
    assert results["summary"]["extra"]["checkpoint"].startswith("local://")


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("env.calculator=abacus", "bad value for env.calculator"),
        ("env.max_attempts=0", "max_attempts must be >= 1"),
        ("env.bogus=1", "unknown key 'env.bogus'"),
        ("data.source=web", "source must be one of"),
        ("data.levels=1,9", "levels must be"),
    ],
)
def test_bad_game_values_exit_2_with_one_line(capsys, arg, message):
    assert train_main([arg]) == 2
    assert eval_main([arg.removeprefix("data.")]) == 2  # the eval command's data keys are top-level
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(message in line for line in err)
