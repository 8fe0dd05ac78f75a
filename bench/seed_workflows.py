"""The tinker docs' workflows end to end on the embedded model, offline, each through its command.

(a) RLHF: ``python -m envs.judge.rlhf`` (SL policy; reward model on the shipped comparisons, its
    held-out pair accuracy as RL uses it, in both orders by the label's log-odds; RL against it through the pairwise env; the held-out judgement of the
    RL policy against the SL policy by the ``rules`` judge);
(b) prompt distillation: ``python -m envs.distill`` (held-out accuracy of the unprompted model,
    the teacher and the student; recovery = the student's share of the teacher's gain);
(c) an LR sweep: ``python -m training.sweep training.testing learning_rate=... seed=0,1`` (the toy
    parity env on the model: the machinery of launch, resume, collection, table and plot);
(d) Inspect: ``python -m backend.offline tinker_cookbook.eval.run_inspect_evals`` on the shipped
    24 questions (``envs/evals/inspect_tasks.py@qa``), the cookbook's runner unchanged.

Run: ``nice .venv/bin/python bench/seed_workflows.py [--out runs/bench_workflows] [--quick]``
(``--quick``: the tiny random model and tiny sizes, a smoke test of the script: its figures mean
nothing). Each stage resumes from its folder under ``--out``. The last line is
``rm_heldout_accuracy=<a> rlhf_heldout_win_gain=<b> distill_recovery=<c> sweep_runs=<n>
inspect_samples=<m>``; goals (full run): a >= 0.75, b >= 0.1, c >= 0.7, n >= 6, m >= 20.
Each stage prints its minutes and the load average after it. Figures, with the machine and the
load they were measured at, go to ``docs/measurements.md``, not here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
TINY = "turngym/tiny-random-llama"

QUICK_RLHF = [
    "lora_rank=2",
    "sft_steps=1",
    "dataset_max_pairs=48",
    "n_test_prompts=2",
    "rm_max_steps=1",
    "rl_steps=1",
    "rl_batch_size=1",
    "rl_group_size=2",
    "max_tokens=4",
    "eval_samples=1",
]
QUICK_DISTILL = ["lora_rank=2", "steps=1", "max_tokens=3"]


def run(args: list[str], log: Path) -> float:
    """``python -m <args>`` from the repository root, output to ``log``; returns seconds (exits on
    failure) and prints the stage's minutes and the load average over it (a stage's time on a loaded
    machine is not its time on an idle one)."""
    t0 = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log.open("w") as out:
        rc = subprocess.call(
            [sys.executable, "-m", *args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env
        )
    if rc != 0:
        print(f"[bench] python -m {' '.join(args[:2])} failed (exit {rc}); see {log}", file=sys.stderr)
        raise SystemExit(1)
    seconds = time.monotonic() - t0
    one, five, fifteen = os.getloadavg()
    print(
        f"[bench] {args[0]}: {seconds / 60:.1f} min; load average after it {one:.1f} / {five:.1f} / {fifteen:.1f}",
        flush=True,
    )
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Run the four stages; returns the exit status."""
    parser = argparse.ArgumentParser(prog="bench/seed_workflows.py")
    parser.add_argument("--out", default="runs/bench_workflows")
    parser.add_argument("--quick", action="store_true", help="tiny model, tiny sizes (a smoke test)")
    ns = parser.parse_args(argv)
    out = Path(ns.out).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    model = TINY if ns.quick else SMOLLM2
    print(f"[bench] load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)", flush=True)
    seconds: dict[str, float] = {}

    rlhf = out / "rlhf"
    seconds["rlhf"] = run(
        ["envs.judge.rlhf", f"log_path={rlhf}", f"model_name={model}", *(QUICK_RLHF if ns.quick else [])],
        out / "rlhf.log",
    )
    summary = json.loads((rlhf / "summary.json").read_text())
    judged = summary["judgement"]
    se = judged.get("heldout_win_rate_se")
    print(
        f"[bench] rlhf: RM held-out accuracy {summary['rm']['heldout_accuracy_before']:.3f} -> "
        f"{summary['rm_heldout_accuracy']:.3f} (greedy verdict "
        f"{summary['rm'].get('heldout_accuracy_greedy', float('nan')):.3f}); RL vs SL win rate {judged['rm_win_rate']:.3f} (RM), "
        f"{judged['heldout_win_rate']:.3f} +- {float('nan') if se is None else se:.3f} (rules, "
        f"{judged['pairs']} pairs, standard error over the prompts); correct {judged['sl_correct']:.3f} -> {judged['rl_correct']:.3f} "
        f"({seconds['rlhf']:.0f}s)",
        flush=True,
    )

    distill = out / "distill"
    seconds["distill"] = run(
        ["envs.distill", f"log_path={distill}", f"model_name={model}", *(QUICK_DISTILL if ns.quick else [])],
        out / "distill.log",
    )
    d = json.loads((distill / "summary.json").read_text())
    print(
        f"[bench] distill: unprompted {d['unprompted_accuracy']:.3f}, teacher {d['teacher_accuracy']:.3f}, "
        f"student {d['student_accuracy']:.3f} ({seconds['distill']:.0f}s)",
        flush=True,
    )

    sweep = out / "sweep"
    rates = "1e-4,1e-2" if ns.quick else "1e-4,1e-3,1e-2"
    seeds = "0" if ns.quick else "0,1"
    steps = "1" if ns.quick else "4"
    seconds["sweep"] = run(
        [
            "training.sweep",
            "training.testing",
            f"learning_rate={rates}",
            f"seed={seeds}",
            f"model_name={model}",
            f"max_steps={steps}",
            f"eval_every={steps}",
            "progress=false",
            "--root",
            str(sweep),
        ],
        out / "sweep.log",
    )
    sweep_line = (out / "sweep.log").read_text().strip().splitlines()[-1]
    sweep_runs = int(sweep_line.split()[0].split("=")[1])
    print(f"[bench] sweep: {sweep_line} ({seconds['sweep']:.0f}s)", flush=True)

    inspect_logs = out / "inspect"
    seconds["inspect"] = run(
        [
            "backend.offline",
            "--root",
            str(out / "inspect-ckpt"),
            "tinker_cookbook.eval.run_inspect_evals",
            f"tasks={ROOT / 'envs' / 'evals' / 'inspect_tasks.py'}@qa",
            f"model_name={model}",
            "renderer_name=qwen3_instruct",
            f"max_tokens={4 if ns.quick else 16}",
            "temperature=0",
            f"log_dir={inspect_logs}",
            "log_level=warning",
            *(["limit=3"] if ns.quick else []),
        ],
        out / "inspect.log",
    )
    from inspect_ai.log import read_eval_log

    latest = max(inspect_logs.glob("*.eval"), key=lambda p: p.stat().st_mtime)
    result = read_eval_log(str(latest))
    samples = result.results.completed_samples if result.results else 0
    accuracy = result.results.scores[0].metrics["accuracy"].value if result.results else float("nan")
    print(
        f"[bench] inspect: {samples} samples, accuracy {accuracy:.3f} ({seconds['inspect']:.0f}s)", flush=True
    )

    print(
        f"[bench] total {sum(seconds.values()):.0f}s; load average at end: {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    print(
        f"rm_heldout_accuracy={summary['rm_heldout_accuracy']:.3f} "
        f"rlhf_heldout_win_gain={summary['rlhf_heldout_win_gain']:.3f} "
        f"distill_recovery={d['distill_recovery']:.3f} sweep_runs={sweep_runs} inspect_samples={samples}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
