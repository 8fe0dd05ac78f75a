"""Learning-rate sweeps, the tinker docs' workflow: launch a grid, collect, plot, pick.

``python -m training.sweep MODULE learning_rate=1e-4,3e-4,1e-3 seed=0,1 [key=value ...] [--root DIR]``

runs ``python -m MODULE log_path=<root>/<point> key=value ...`` for every point of the grid (the
product of the comma-separated values), one after another (``--jobs N``: N at once, where cores
allow). A point whose folder holds ``sweep_run.json`` with status ``done`` is skipped, so a sweep
that was stopped resumes. ``MODULE`` is any train CLI taking ``key=value`` arguments and
``log_path``: ours (``envs.math.train``, ``envs.judge.train``, ``training.testing``...) or the
cookbook's (``tinker_cookbook.recipes.sl_basic`` through ``backend.offline``: pass
``--launcher backend.offline``).

Then it reads each run folder: the held-out metric (``--metric``; by default the last
``eval.jsonl`` row's ``eval/win_rate`` or ``eval/reward/mean`` (higher is better) for our RL runs,
else the last ``test/nll``-like ``metrics.jsonl`` value or ``train_mean_nll`` (lower is better)
for SL runs, ours or the cookbook's) and its curve over steps; writes ``sweep.csv`` and
``sweep.md`` (one row per run), and ``lr_sweep.png`` (the U-curve: the metric against the rate,
each seed and their mean, log scale; beside it every run's curve); prints the table and names the
best rate (best mean over seeds). The rate is the ``learning_rate`` key, or the one key ending in
``learning_rate`` (``dpo_learning_rate`` of ``envs.judge.preference``); a pipeline keeps its
training runs in stage folders, which ``--metric`` reaches (e.g. DPO's held-out
``--metric heldout/accuracy``, read from ``<point>/dpo/metrics.jsonl``). The last line is
``sweep_runs=<n> best_learning_rate=<lr> <metric>=<value>``.

A rate found on the embedded model is a LoRA rate (``lora_alpha = 2 x rank`` locally, a scale
of 2); on a service LoRA scales by its own alpha (32 by default, ``alpha / rank``), and the rates
of another model follow the cookbook's ``get_lr`` scaling: see :mod:`training.hyperparam`.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SweepRun", "collect", "folder_names", "grid", "main", "rate_key", "read_run", "run_sweep"]

DONE_FILE = "sweep_run.json"
"""Written in a run folder when its command finished (status and exit code)."""


@dataclass
class SweepRun:
    """One point of the grid and what its run folder says."""

    params: dict[str, str]
    log_path: Path
    status: str = "pending"
    metric: str | None = None
    value: float | None = None
    curve: list[tuple[float, float]] = field(default_factory=list)
    seconds: float = 0.0


def grid(args: Sequence[str]) -> list[dict[str, str]]:
    """The points of ``key=v1,v2`` arguments (product, in argument order)."""
    keys, values = [], []
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value[,value...], got {arg!r}")
        keys.append(key)
        values.append([v for v in value.split(",") if v] or [value])
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]


def folder_names(points: Sequence[dict[str, str]]) -> list[str]:
    """Each point's run folder name: its values of the keys that vary over the grid and of the rate
    key (a fixed ``dataset=data/x.jsonl`` or ``model_name=org/model`` stays out of it), ``/`` and
    ``.`` in keys made ``-``."""
    varying = {k for k in {k for p in points for k in p} if len({p.get(k) for p in points}) > 1}
    names = []
    for p in points:
        keep = [k for k in p if k in varying or k == rate_key(p)]
        names.append("_".join(f"{k.replace('.', '-')}={p[k].replace('/', '-')}" for k in keep) or "default")
    return names


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def lower_is_better(metric: str) -> bool:
    """Whether smaller values of ``metric`` are better (losses, NLLs, errors)."""
    return any(word in metric for word in ("nll", "loss", "error", "perplexity"))


def read_run(
    log_path: Path, metric: str | None = None
) -> tuple[str | None, float | None, list[tuple[float, float]]]:
    """``(metric name, held-out value, curve)`` of a run folder (ours or the cookbook's). A
    pipeline's folder (``envs.judge.preference``, ``envs.judge.rlhf``) keeps its runs in stage
    folders: with ``metric`` given and not in the folder itself, the first stage folder
    (``log_path/<stage>/``, in name order) whose ``eval.jsonl`` or ``metrics.jsonl`` has it answers."""
    found = _read_folder(log_path, metric)
    if found[1] is not None or not metric:
        return found
    for stage in sorted(p for p in log_path.iterdir() if p.is_dir()) if log_path.is_dir() else []:
        name, value, curve = _read_folder(stage, metric)
        if value is not None:
            return name, value, curve
    return found


def _read_folder(
    log_path: Path, metric: str | None
) -> tuple[str | None, float | None, list[tuple[float, float]]]:
    evals, metrics = _rows(log_path / "eval.jsonl"), _rows(log_path / "metrics.jsonl")
    candidates = [metric] if metric else ["eval/win_rate", "eval/reward/mean"]
    for name in candidates:
        points = [(float(r.get("step", i)), float(r[name])) for i, r in enumerate(evals) if name in r]
        if points:
            return name, points[-1][1], points
    if not metric:
        tests = sorted({k for r in metrics for k in r if k.startswith("test/") and lower_is_better(k)})
        candidates = [*tests, "train_mean_nll"]
    for name in candidates:
        points = [(float(r.get("step", i)), float(r[name])) for i, r in enumerate(metrics) if name in r]
        if points:
            return name, points[-1][1], points
    return metric, None, []


def run_sweep(
    module: str,
    points: Sequence[dict[str, str]],
    root: Path,
    *,
    launcher: str | None = None,
    jobs: int = 1,
    extra_env: dict[str, str] | None = None,
) -> list[SweepRun]:
    """Run every point not done yet (``jobs`` at a time); returns the runs."""
    runs = [SweepRun(dict(p), root / name) for p, name in zip(points, folder_names(points), strict=True)]
    pending: list[tuple[SweepRun, subprocess.Popen[bytes], float]] = []
    env = {**os.environ, **(extra_env or {})}

    def finish(run: SweepRun, proc: subprocess.Popen[bytes], started: float) -> None:
        rc = proc.wait()
        run.seconds = time.monotonic() - started
        run.status = "done" if rc == 0 else f"failed (exit {rc})"
        (run.log_path / DONE_FILE).write_text(
            json.dumps({"status": "done" if rc == 0 else "failed", "returncode": rc, "seconds": run.seconds})
        )
        print(f"[sweep] {run.log_path.name}: {run.status} in {run.seconds:.0f}s", flush=True)

    for run in runs:
        done = run.log_path / DONE_FILE
        if done.is_file() and json.loads(done.read_text()).get("status") == "done":
            run.status = "done"
            print(f"[sweep] {run.log_path.name}: done before, skipped", flush=True)
            continue
        run.log_path.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            *([launcher] if launcher else []),
            module,
            f"log_path={run.log_path}",
        ]
        command += [f"{k}={v}" for k, v in run.params.items()]
        print(f"[sweep] {run.log_path.name}: {' '.join(command[2:])}", flush=True)
        with (run.log_path / "sweep_output.log").open("ab") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        pending.append((run, proc, time.monotonic()))
        while len(pending) >= jobs:
            finish(*pending.pop(0))
    for item in pending:
        finish(*item)
    return runs


def collect(runs: Sequence[SweepRun], metric: str | None = None) -> None:
    """Fill each run's metric, value and curve from its folder."""
    for run in runs:
        run.metric, run.value, run.curve = read_run(run.log_path, metric)


def rate_key(params: dict[str, str]) -> str | None:
    """The grid key that is the learning rate: ``learning_rate``, else the one key ending in
    ``learning_rate`` (``dpo_learning_rate``, ``rm_learning_rate``, ...); None if there is none."""
    if "learning_rate" in params:
        return "learning_rate"
    keys = [k for k in params if k.endswith("learning_rate")]
    return keys[0] if len(keys) == 1 else None


def _lr(run: SweepRun) -> float:
    key = rate_key(run.params)
    return float(run.params[key]) if key else math.nan


def best_rate(runs: Sequence[SweepRun]) -> tuple[float, float, str] | None:
    """``(learning rate, mean value over its runs, metric)`` of the best rate, or None."""
    scored = [r for r in runs if r.value is not None and r.metric and not math.isnan(_lr(r))]
    if not scored:
        return None
    metric = scored[0].metric or ""
    by_rate: dict[float, list[float]] = {}
    for run in scored:
        by_rate.setdefault(_lr(run), []).append(float(run.value))  # type: ignore[arg-type]
    means = {lr: sum(v) / len(v) for lr, v in by_rate.items()}
    pick = min if lower_is_better(metric) else max
    lr = pick(means, key=lambda k: means[k])
    return lr, means[lr], metric


def write_table(runs: Sequence[SweepRun], root: Path) -> str:
    """``sweep.csv`` and ``sweep.md``; returns the markdown table."""
    keys = list(dict.fromkeys(k for r in runs for k in r.params))
    with (root / "sweep.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*keys, "metric", "value", "status", "log_path"])
        for r in runs:
            writer.writerow(
                [*(r.params.get(k, "") for k in keys), r.metric or "", r.value, r.status, r.log_path]
            )
    lines = [
        "| " + " | ".join([*keys, "metric", "value", "status"]) + " |",
        "|" + "---|" * (len(keys) + 3),
    ]
    for r in runs:
        value = "" if r.value is None else f"{r.value:.4g}"
        lines.append(
            "| " + " | ".join([*(r.params.get(k, "") for k in keys), r.metric or "", value, r.status]) + " |"
        )
    table = "\n".join(lines) + "\n"
    (root / "sweep.md").write_text(table)
    return table


def plot(runs: Sequence[SweepRun], path: Path) -> Path | None:
    """The U-curve (metric against learning rate, log x) and every run's curve; None without data."""
    scored = [r for r in runs if r.value is not None and not math.isnan(_lr(r))]
    if not scored:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = scored[0].metric or "metric"
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    seeds = sorted({r.params.get("seed", "") for r in scored})
    for seed in seeds:
        points = sorted((_lr(r), float(r.value)) for r in scored if r.params.get("seed", "") == seed)  # type: ignore[arg-type]
        left.plot(*zip(*points, strict=True), "o--", alpha=0.5, label=f"seed {seed}" if seed else "run")
    by_rate: dict[float, list[float]] = {}
    for r in scored:
        by_rate.setdefault(_lr(r), []).append(float(r.value))  # type: ignore[arg-type]
    rates = sorted(by_rate)
    left.plot(rates, [sum(by_rate[x]) / len(by_rate[x]) for x in rates], "k-", lw=2, label="mean")
    left.set_xscale("log")
    left.set_xlabel("learning rate")
    left.set_ylabel(metric)
    left.set_title("held-out metric against learning rate")
    left.legend(fontsize=8)
    for r in scored:
        if r.curve:
            right.plot(*zip(*r.curve, strict=True), label=r.log_path.name, alpha=0.8)
    right.set_xlabel("step")
    right.set_ylabel(metric)
    right.set_title("runs")
    right.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m training.sweep MODULE key=v1,v2 ...``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m training.sweep",
        description="Run a grid of a train CLI (sequentially by default; resumable), collect each run's "
        "held-out metric and curve, write a table and a U-curve plot, name the best learning rate.",
    )
    parser.add_argument("module", help="train module, e.g. envs.math.train")
    parser.add_argument("grid", nargs="*", help="key=value or key=v1,v2,... (the grid is their product)")
    parser.add_argument("--root", default=None, help="sweep folder (default runs/sweep/<module>)")
    parser.add_argument("--metric", default=None, help="metric to compare (default: the held-out one found)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (default 1: sequential)")
    parser.add_argument("--launcher", default=None, help="module running MODULE, e.g. backend.offline")
    parser.add_argument("--collect-only", action="store_true", help="read the run folders, launch nothing")
    ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        points = grid(ns.grid)
    except ValueError as exc:
        print(f"python -m training.sweep: error: {exc}", file=sys.stderr)
        return 2
    if ns.jobs < 1:
        print("python -m training.sweep: error: --jobs must be >= 1", file=sys.stderr)
        return 2
    root = Path(ns.root or Path("runs") / "sweep" / ns.module).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    if ns.collect_only:
        runs = [
            SweepRun(p, root / name, status="collected")
            for p, name in zip(points, folder_names(points), strict=True)
        ]
    else:
        runs = run_sweep(ns.module, points, root, launcher=ns.launcher, jobs=ns.jobs)
    collect(runs, ns.metric)
    print(write_table(runs, root), end="")
    png = plot(runs, root / "lr_sweep.png")
    if png:
        print(f"plot: {png}")
    best = best_rate(runs)
    finished = sum(r.status == "done" for r in runs)
    if best is None:
        print(f"sweep_runs={finished} best_learning_rate=none (no run has a metric and a *learning_rate key)")
        return 1
    lr, value, metric = best
    print(f"sweep_runs={finished} best_learning_rate={lr:g} {metric}={value:.4g}")
    return 0 if finished == len(runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
