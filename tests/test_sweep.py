"""``python -m training.sweep``: a grid of a train CLI run sequentially and resumably, collected into
a table, a U-curve plot and the best rate (the toy env on TINY, one step per run); the
``hyperparam`` helper."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from training.hyperparam import LOCAL_LEARNING_RATES, learning_rate
from training.sweep import SweepRun, best_rate, grid, main, read_run


def test_grid_is_the_product_in_argument_order() -> None:
    assert grid(["learning_rate=1e-4,1e-3", "seed=0,1", "max_steps=2"]) == [
        {"learning_rate": "1e-4", "seed": "0", "max_steps": "2"},
        {"learning_rate": "1e-4", "seed": "1", "max_steps": "2"},
        {"learning_rate": "1e-3", "seed": "0", "max_steps": "2"},
        {"learning_rate": "1e-3", "seed": "1", "max_steps": "2"},
    ]
    with pytest.raises(ValueError, match="expected key=value"):
        grid(["learning_rate"])


def test_best_rate_averages_seeds_and_knows_the_direction(tmp_path: Path) -> None:
    def run(lr: str, seed: str, metric: str, value: float) -> SweepRun:
        return SweepRun({"learning_rate": lr, "seed": seed}, tmp_path, "done", metric, value)

    wins = [
        run("1e-4", "0", "eval/win", 0.2),
        run("1e-4", "1", "eval/win", 0.9),
        run("1e-3", "0", "eval/win", 0.5),
    ]
    assert best_rate(wins) == (1e-4, pytest.approx(0.55), "eval/win")
    nll = [run("1e-4", "0", "train_mean_nll", 2.0), run("1e-3", "0", "train_mean_nll", 1.0)]
    assert best_rate(nll) == (1e-3, 1.0, "train_mean_nll")


def test_sweep_runs_resumes_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "training.testing",
        "learning_rate=1e-4,1e-2",
        "seed=0",
        "max_steps=1",
        "eval_every=1",
        "progress=false",
        "--root",
        str(tmp_path),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("sweep_runs=2 best_learning_rate=") and "eval/win_rate=" in last
    with (tmp_path / "sweep.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["learning_rate"] for r in rows] == ["1e-4", "1e-2"] and all(r["status"] == "done" for r in rows)
    assert (tmp_path / "lr_sweep.png").stat().st_size > 0
    run = Path(rows[0]["log_path"])
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["progress"] == 1.0 and metrics[-1]["train_mean_nll"] > 0  # the docs' script's names
    name, value, curve = read_run(run)
    assert name == "eval/win_rate" and value is not None and len(curve) == 2  # before and after the step
    assert main(args) == 0  # resumed: nothing reruns
    assert capsys.readouterr().out.count("done before, skipped") == 2


def test_hyperparam_local_defaults_and_the_cookbook_for_service_models() -> None:
    from tinker_cookbook.hyperparam_utils import get_lr

    assert learning_rate("HuggingFaceTB/SmolLM2-135M-Instruct", "rl") == LOCAL_LEARNING_RATES["rl"]
    assert learning_rate("meta-llama/Llama-3.1-8B") == pytest.approx(get_lr("meta-llama/Llama-3.1-8B"))
    with pytest.raises(ValueError, match="kind must be one of"):
        learning_rate("HuggingFaceTB/SmolLM2-135M-Instruct", "bogus")
