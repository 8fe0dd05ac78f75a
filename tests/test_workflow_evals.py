"""The tinker docs' offline evaluations on the embedded backend (TINY): the cookbook's
``run_inspect_evals`` run unchanged through ``python -m backend.offline`` on a local task file,
and Inspect's ``model_graded_qa`` with a grader served by the local backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.log import read_eval_log

ROOT = Path(__file__).resolve().parents[1]
TINY = "turngym/tiny-random-llama"


def test_run_inspect_evals_runs_offline_on_a_local_task_file(tmp_path: Path) -> None:
    """A fresh process: the compute thread loads the model while the main thread loads the
    tokenizer (both import from transformers). Before the fix this crashed with
    ``ImportError: cannot import name 'PreTrainedTokenizerFast'``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "backend.offline",
            "--root",
            str(tmp_path / "ckpt"),
            "tinker_cookbook.eval.run_inspect_evals",
            f"tasks={ROOT / 'envs' / 'evals' / 'inspect_tasks.py'}@qa",
            f"model_name={TINY}",
            "renderer_name=qwen3_instruct",
            "max_tokens=4",
            "temperature=0",
            f"log_dir={tmp_path / 'logs'}",
            "log_level=warning",
            "limit=3",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ImportError" not in proc.stderr
    (log,) = (tmp_path / "logs").glob("*.eval")
    result = read_eval_log(str(log))
    assert result.status == "success" and result.eval.dataset.name == "qa"
    assert result.results is not None and result.results.completed_samples == 3
    assert "accuracy" in result.results.scores[0].metrics


def test_model_graded_qa_with_a_grader_served_by_the_local_backend(tmp_path: Path) -> None:
    """Inspect's ``model_graded_qa``, its grader model a local sampling client: every sample's
    grading conversation ends with the local grader's reply (TINY's random text holds no grade,
    so Inspect scores it as ungraded)."""
    import asyncio

    from inspect_ai import eval_async

    from backend.offline import use_local_backend
    from envs.evals.inspect_tasks import graded_qa, grader_model

    with use_local_backend(tmp_path / "ckpt"):
        solver_model = grader_model(TINY, max_tokens=4)
        task = graded_qa(limit=2, grader=TINY)
        (log,) = asyncio.run(
            eval_async(task, model=solver_model, log_dir=str(tmp_path / "logs"), log_level="warning")
        )
    assert log.status == "success" and log.results is not None
    assert log.results.completed_samples == 2
    assert log.samples is not None and len(log.samples) == 2
    for sample in log.samples:
        score = next(iter(sample.scores.values()))  # type: ignore[union-attr]
        grading = (score.metadata or {})["grading"]
        assert grading[0]["role"] == "user" and "GRADE: C" in grading[0]["content"]
        assert grading[-1]["role"] == "assistant" and grading[-1]["model"] == TINY
        assert score.value in ("C", "I") or "Grade not found" in (score.explanation or "")
    assert grader_model.__doc__ and "tinker://" in grader_model.__doc__


def test_question_file_errors_are_one_line(tmp_path: Path) -> None:
    from envs.evals.inspect_tasks import QA_FILE, load_samples

    assert len(load_samples(QA_FILE)) >= 20
    with pytest.raises(FileNotFoundError, match="question file not found"):
        load_samples(tmp_path / "none.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "x"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:1: expected an object with 'input' and 'target'"):
        load_samples(bad)


def test_train_cli_takes_an_evaluator_builder_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from training import run_cli
    from training.testing import ToyConfig

    def toy_main(args: list[str]) -> int:
        return run_cli(ToyConfig, args, prog="training.testing")

    base = [f"log_path={tmp_path / 'run'}", "max_steps=1", "eval_every=1", "progress=false"]
    assert toy_main([*base, "evaluator=envs.evals.builders:nope"]) == 2
    assert "does not resolve" in capsys.readouterr().err
    assert toy_main([*base, "evaluator=envs.evals.builders:qa_inspect", "renderer_name=qwen3_instruct"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert "qa/accuracy" in rows[0]  # the cookbook's InspectEvaluator ran inside our loop
