"""``python -m training.sweep``: a grid of a train CLI run sequentially and resumably, collected into
a table, a U-curve plot and the best rate (the toy env on TINY, one step per run); the
``hyperparam`` helper."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from training.hyperparam import LOCAL_LEARNING_RATES, learning_rate
from training.sweep import SweepRun, best_rate, folder_names, grid, main, rate_key, read_run


def test_grid_is_the_product_in_argument_order() -> None:
    assert grid(["learning_rate=1e-4,1e-3", "seed=0,1", "max_steps=2"]) == [
        {"learning_rate": "1e-4", "seed": "0", "max_steps": "2"},
        {"learning_rate": "1e-4", "seed": "1", "max_steps": "2"},
        {"learning_rate": "1e-3", "seed": "0", "max_steps": "2"},
        {"learning_rate": "1e-3", "seed": "1", "max_steps": "2"},
    ]
    with pytest.raises(ValueError, match="expected key=value"):
        grid(["learning_rate"])


def test_folder_names_keep_the_varying_keys_and_the_rate() -> None:
    points = grid(["dpo_learning_rate=1e-5,1e-4", "dataset=data/c.jsonl", "model_name=org/m", "seed=0,1"])
    assert folder_names(points) == [
        "dpo_learning_rate=1e-5_seed=0",
        "dpo_learning_rate=1e-5_seed=1",
        "dpo_learning_rate=1e-4_seed=0",
        "dpo_learning_rate=1e-4_seed=1",
    ]
    assert folder_names(grid(["learning_rate=3e-4", "model_name=org/m"])) == ["learning_rate=3e-4"]
    assert folder_names(grid(["max_steps=2"])) == ["default"]


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


def test_a_pipelines_rate_key_and_stage_folder_are_found(tmp_path: Path) -> None:
    assert rate_key({"dpo_learning_rate": "1e-5", "seed": "0"}) == "dpo_learning_rate"
    assert rate_key({"learning_rate": "1e-4", "rm_learning_rate": "1e-3"}) == "learning_rate"
    assert rate_key({"rm_learning_rate": "1", "dpo_learning_rate": "2"}) is None  # ambiguous
    (tmp_path / "sl").mkdir()
    (tmp_path / "dpo").mkdir()
    (tmp_path / "sl" / "metrics.jsonl").write_text(json.dumps({"step": 0, "train_mean_nll": 1.0}) + "\n")
    rows = [
        {"step": 0, "heldout/accuracy": 0.5},
        {"step": 3, "dpo_loss": 0.6},
        {"step": 6, "heldout/accuracy": 0.75},
    ]
    (tmp_path / "dpo" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_run(tmp_path, "heldout/accuracy") == ("heldout/accuracy", 0.75, [(0.0, 0.5), (6.0, 0.75)])
    assert read_run(tmp_path, "heldout/missing")[1] is None
    assert read_run(tmp_path)[1] is None  # no metric named: the folder itself only
    runs = [
        SweepRun({"dpo_learning_rate": lr}, tmp_path, "done", "heldout/accuracy", v)
        for lr, v in (("1e-5", 0.5), ("1e-4", 0.8))
    ]
    assert best_rate(runs) == (1e-4, 0.8, "heldout/accuracy")


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
