"""The cookbook's Inspect AI bridge, offline, on the local sampler (TINY): our GSM8K-style task
read from a local file, scored by our math grader; in ``python -m envs.math.eval`` and as a
``training.Config`` evaluator. Needs the optional ``inspect-ai`` (installed by scripts/setup.sh)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.scorer import CORRECT, INCORRECT, Target
from tinker_cookbook.eval.inspect_evaluators import InspectEvaluatorBuilder

import training
from envs.math import MathProblem
from envs.math.eval import main as eval_main
from envs.math.inspect_task import gsm8k, math_grader, write_gsm8k_jsonl
from training.testing import ToyConfig

TINY = "turngym/tiny-random-llama"
FIXTURE = Path(__file__).parent / "fixtures" / "math_gsm8k.jsonl"


def test_math_grader_scores_the_boxed_answer() -> None:
    score = math_grader()

    async def grade(text: str, target: str) -> object:
        state = SimpleNamespace(output=SimpleNamespace(completion=text))
        return (await score(state, Target(target))).value  # type: ignore[arg-type]

    assert anyio.run(grade, "3 * 4 = 12, so \\boxed{12}", "12") == CORRECT
    assert anyio.run(grade, "\\boxed{\\frac{24}{2}}", "12") == CORRECT
    assert anyio.run(grade, "\\boxed{13}", "12") == INCORRECT
    assert anyio.run(grade, "twelve", "12") == INCORRECT


def test_task_reads_a_local_gsm8k_file_and_fails_clearly_on_a_missing_one(tmp_path: Path) -> None:
    task = gsm8k(path=str(FIXTURE), limit=2)
    assert len(task.dataset) == 2 and task.dataset.name == "gsm8k"
    assert task.dataset[0].input.endswith("\\boxed{}.")
    written = write_gsm8k_jsonl([MathProblem("1+1?", "2")], tmp_path / "g.jsonl")
    assert gsm8k(path=str(written)).dataset[0].target == "2"
    with pytest.raises(FileNotFoundError):
        gsm8k(path=str(tmp_path / "missing.jsonl"))


def test_math_eval_harness_inspect_runs_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "eval.json"
    args = [
        "harness=inspect",
        "n_test=3",
        f"model_name={TINY}",
        "max_tokens=4",
        f"output={out}",
        "progress=false",
    ]
    assert eval_main(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("inspect_samples="))
    assert line.startswith("inspect_samples=3 ")
    summary = json.loads(out.read_text())["summary"]
    assert summary["n"] == 3 and "gsm8k/accuracy" in summary["extra"]["metrics"]
    assert Path(summary["extra"]["data"]).is_file()  # the generated split, written GSM8K-style


def test_inspect_task_as_a_training_evaluator(tmp_path: Path) -> None:
    builder = InspectEvaluatorBuilder(
        tasks=[gsm8k(path=str(FIXTURE))],
        renderer_name="qwen3_instruct",
        model_name=TINY,
        max_tokens=4,
        limit=2,
        log_dir=str(tmp_path / "inspect-logs"),
        log_level="warning",
    )
    config = ToyConfig(
        log_path=str(tmp_path / "run"),
        max_steps=1,
        eval_every=1,
        eval_groups=0,
        progress=False,
        evaluator_builders=[builder],
    )
    training.train(config)
    row = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert row["gsm8k/accuracy"] == 0.0 and "gsm8k/stderr" in row
