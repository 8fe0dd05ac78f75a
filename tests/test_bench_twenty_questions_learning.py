"""The learning bench's figures: read from a run folder's ``eval.jsonl``, one line per goal."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "twenty_questions_learning.py"


def _bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("twenty_questions_learning", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_folder(tmp_path: Path, name: str, rows: list[tuple[int, float, float]]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    lines = [
        json.dumps(
            {
                "step": step,
                "eval/win_rate": win,
                "eval/question_turn_fraction": q,
                "eval/question_fraction_before_guess": min(1.0, q + 0.25),
            }
        )
        for step, win, q in rows
    ]
    (folder / "eval.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_seed_result_reads_the_warm_start_and_the_after_rl_evaluations(tmp_path: Path) -> None:
    bench = _bench_module()
    result = bench.seed_result(
        _run_folder(tmp_path, "s0", [(0, 0.375, 0.4), (10, 0.7, 0.55), (20, 0.875, 0.6)])
    )
    assert result["win_rate_warm_start"] == 0.375 and result["win_rate_after"] == 0.875
    assert result["rl_gain"] == pytest.approx(0.5) and result["rl_steps"] == 20
    assert (
        result["question_turn_fraction_warm_start"] == 0.4 and result["question_turn_fraction_after"] == 0.6
    )
    assert result["question_fraction_before_guess_after"] == 0.85
    assert result["win_rate_by_step"] == {0: 0.375, 10: 0.7, 20: 0.875}


def test_seed_result_refuses_a_run_without_both_stages(tmp_path: Path) -> None:
    bench = _bench_module()
    with pytest.raises(ValueError, match="step 0 and after RL"):
        bench.seed_result(_run_folder(tmp_path, "only_warm", [(0, 0.4, 0.5)]))
    with pytest.raises(ValueError, match="step 0 and after RL"):
        bench.seed_result(_run_folder(tmp_path, "no_step0", [(5, 0.4, 0.5), (10, 0.8, 0.5)]))


def test_summary_line_reports_each_goal_at_its_worst_seed(tmp_path: Path) -> None:
    bench = _bench_module()
    results = [
        bench.seed_result(_run_folder(tmp_path, "a", [(0, 0.25, 0.3), (20, 0.9, 0.7)])),
        bench.seed_result(_run_folder(tmp_path, "b", [(0, 0.5, 0.4), (20, 0.8, 0.55)])),
    ]
    assert bench.summary_line(results) == (
        "win_rate_warm_start=0.500 win_rate_after=0.800 rl_gain=+0.300 question_turn_fraction_after=0.550 "
        "question_fraction_before_guess_after=0.800 seeds=2"
    )


def test_bench_refuses_a_run_without_evaluations(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench_module()
    assert bench.main(["--quick", "eval_every=0"]) == 2
    assert "eval_every must be > 0" in capsys.readouterr().err


def test_bench_reads_finished_runs_without_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _bench_module()
    a = _run_folder(tmp_path, "a", [(0, 0.25, 0.6), (16, 0.5, 0.7)])
    b = _run_folder(tmp_path, "b", [(0, 0.375, 0.5), (16, 0.875, 0.65)])
    assert bench.main(["--runs", str(a), str(b)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "after 16 RL steps 0.500 (rl_gain +0.250)" in out[0]
    assert out[-1] == (
        "win_rate_warm_start=0.375 win_rate_after=0.500 rl_gain=+0.250 question_turn_fraction_after=0.650 "
        "question_fraction_before_guess_after=0.900 seeds=2"
    )
    assert not (tmp_path / "a" / "metrics.jsonl").exists()  # nothing was trained


def test_bench_refuses_an_unfinished_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench_module()
    assert bench.main(["--runs", str(_run_folder(tmp_path, "warm_only", [(0, 0.3, 0.6)]))]) == 2
    assert "need held-out evaluations at step 0 and after RL" in capsys.readouterr().err
    assert bench.main(["--runs", str(tmp_path / "missing")]) == 2
