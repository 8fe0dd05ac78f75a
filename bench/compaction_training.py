"""Periodic compaction in a real training run: a thinking policy trained three ways.

The setting is the math env's thinking series (``env.problems_per_episode=8 env.thinking=true env.fewshot=false``: eight
generated arithmetic problems asked one after another in one conversation, each answered after a
``<think>...</think>`` block), on the embedded SmolLM2-135M, offline. Each way runs the same
command (``python -m envs.math.train`` with the same seed, data, warm start and steps) and differs
only in how earlier thinking is kept in the history:

- ``kept``: ``renderer_name=turngym/qwen3_preserve_thinking``, never compacted: one datum per
  episode, the context grows with every thinking block;
- ``compact``: ``renderer_name=qwen3 compaction_period=N``: thinking kept inside windows of N
  turns and stripped from all earlier turns at each window start (ceil(T/N) datums);
- ``strip``: ``renderer_name=qwen3``, the cookbook's qwen3 default (thinking stripped from the
  history every turn, the prefix breaks every turn: T datums).

Each run is a supervised warm start on scripted thinking transcripts
(``warm_start.episodes``/``steps``: :class:`envs.math.ThinkingSolver`, played through the engine
with that way's renderer; a step trains on ``warm_start.batch_size`` whole episodes, however many
sequences the renderer splits each into) and then RL. Per way it reports, from the runs' own logs:

- ``trained tokens/episode``: tokens in the datums the trainer processed (``rollout/tokens/trained``);
- ``datums/episode``;
- ``prefill tokens/episode``: prompt tokens the local sampler ran through the model during the
  RL rollouts (``sampler/prefill_tokens``: its prefix cache reuses the longest cached prefix, so
  only the tokens after it are prefilled); beside it the two bounds the engine counts: no reuse
  at all (``tokens/per_turn``) and reuse only while the prefix holds (= trained tokens);
- ``s/step``: wall time of an RL step (sampling + training + sampler refresh);
- ``thinking``: fraction of held-out assistant turns with a thinking block, after the warm start
  and after RL (``math/thinking``);
- held-out reward after the warm start and after RL (the same held-out episodes, greedy).

The last line: ``ratio_trained_tokens_compact_vs_strip=<x> ratio_prefill_tokens_compact_vs_strip=<y>
thinking_turn_fraction=<z> reward_gap_compact_vs_strip=<d>`` (``z``: the lowest of the three
ways' post-warm-start fractions; ``d``: held-out reward after RL, compact minus strip). Goals
(issue #13): ``x <= 0.5`` and ``y <= 0.5`` on episodes of >= 6 turns, ``z >= 0.8``, ``d >= -0.05``.

``--quick`` runs the same pipeline on the tiny random model, 4-problem episodes compacted every 2
turns (no learning claim).
Any ``key=value`` argument is passed to every way's training config.

Compaction saves trained tokens, not sampling: the local sampler reuses the longest cached
prefix, so stripping the last turn's thinking costs only the tokens after it, while a compaction
re-renders the window. The figures measured so far, and what they show, are in
``docs/measurements.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

COMMON = {
    "env.problems_per_episode": "8",
    "env.fewshot": "false",
    "env.thinking": "true",
    "data.levels": "1,2",
    "max_tokens": "80",
    "data.batch_size": "2",
    "data.group_size": "2",
    "data.n_test": "48",
    "eval_batches": "1",
    "eval_temperature": "0",
    "learning_rate": "1e-4",
    "warm_start.episodes": "24",
    "warm_start.steps": "8",
    "warm_start.batch_size": "3",
    "warm_start.learning_rate": "1e-3",
    "max_steps": "3",
    "save_every": "0",
    "keep_last": "1",
    "train_transcripts": "1",
    "progress": "false",
    "seed": "0",
}
QUICK = {
    "model_name": "turngym/tiny-random-llama",
    "env.problems_per_episode": "4",
    "max_tokens": "24",
    "data.n_test": "8",
    "warm_start.episodes": "4",
    "warm_start.steps": "2",
    "warm_start.batch_size": "4",
    "max_steps": "1",
    "data.group_size": "2",
}


def ways(period: int) -> dict[str, dict[str, str]]:
    """The three ways: renderer and compaction period."""
    from renderers_ext import QWEN3_PRESERVE_THINKING

    return {
        "kept": {"renderer_name": QWEN3_PRESERVE_THINKING, "compaction_period": "0"},
        "compact": {"renderer_name": "qwen3", "compaction_period": str(period)},
        "strip": {"renderer_name": "qwen3", "compaction_period": "0"},
    }


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _sum(rows: list[dict[str, Any]], key: str) -> float:
    return sum(float(r.get(key) or 0.0) for r in rows)


def figures(run: Path) -> dict[str, float]:
    """One way's figures from its run folder (see the module docstring)."""
    steps = _rows(run / "metrics.jsonl")
    evals = _rows(run / "eval.jsonl")
    episodes = _sum(steps, "rollout/traj/count") or 1.0
    first = next((r for r in evals if r["step"] == 0 and r.get("stage") != "untrained"), {})
    last = evals[-1] if evals else {}
    out = {
        "rl_steps": float(len(steps)),
        "episodes": episodes,
        "turns_per_episode": _sum(steps, "rollout/traj/turns_mean") / max(len(steps), 1),
        "trained_tokens_per_episode": _sum(steps, "rollout/tokens/trained") / episodes,
        "datums_per_episode": _sum(steps, "rollout/traj/datums_per_traj") / max(len(steps), 1),
        "prefill_tokens_per_episode": _sum(steps, "sampler/prefill_tokens") / episodes,
        "reused_tokens_per_episode": _sum(steps, "sampler/reused_tokens") / episodes,
        "no_reuse_tokens_per_episode": _sum(steps, "rollout/tokens/per_turn") / episodes,
        "seconds_per_step": _sum(steps, "time/step") / max(len(steps), 1),
        "thinking_after_warm_start": float(first.get("eval/env/all/math/thinking") or 0.0),
        "thinking_after_rl": float(last.get("eval/env/all/math/thinking") or 0.0),
        "reward_after_warm_start": float(first.get("eval/reward/mean") or 0.0),
        "reward_after_rl": float(last.get("eval/reward/mean") or 0.0),
        "correct_after_rl": float(last.get("eval/win_rate") or 0.0),
    }
    warm = run / "warm_start.json"
    if warm.is_file():
        data = json.loads(warm.read_text())
        out["warm_start_seconds"] = float(data.get("warm_start/seconds", 0.0))
        out["warm_start_loss_last"] = float(data.get("warm_start/loss_last", 0.0))
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Train the three ways and print the figures; the result line is last."""
    parser = argparse.ArgumentParser(
        prog="python bench/compaction_training.py", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny model, 4-problem episodes, period 2: no learning claim"
    )
    parser.add_argument(
        "--period", type=int, default=None, help="compaction period N of the compact way (default 4; 2 quick)"
    )
    parser.add_argument("--ways", default="kept,compact,strip", help="which ways to run (comma separated)")
    parser.add_argument(
        "--out", default=None, help="run folder (default runs/bench/compaction_training/<time>)"
    )
    parser.add_argument("overrides", nargs="*", help="training config key=value overrides (every way)")
    args = parser.parse_args(argv)
    if args.period is None:
        args.period = 2 if args.quick else 4

    import training
    from envs.math.train import MathTrainConfig

    out = Path(args.out or f"runs/bench/compaction_training/{time.strftime('%Y%m%d-%H%M%S')}")
    base = {**COMMON, **(QUICK if args.quick else {})}
    chosen = {k: v for k, v in ways(args.period).items() if k in args.ways.split(",")}
    configs = {}
    for name, way in chosen.items():
        keys = {**base, **way, "log_path": str(out / name)}
        argv_way = [f"{k}={v}" for k, v in keys.items()] + list(args.overrides)
        try:
            configs[name] = training.parse_config(MathTrainConfig, argv_way)
        except training.ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    load = os.getloadavg()
    print(f"[bench] artifacts in {out}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)
    results: dict[str, dict[str, float]] = {}
    t_start = time.monotonic()
    for name, config in configs.items():
        t0 = time.monotonic()
        summary = training.train(config)
        results[name] = {**figures(out / name), "minutes": (time.monotonic() - t0) / 60}
        print(f"[bench] {name}: {summary.describe()}", flush=True)
        print(f"[bench] {name}: {json.dumps(results[name])}", flush=True)
    load_end = os.getloadavg()

    cols = [
        ("turns_per_episode", "turns/ep", ".1f"),
        ("trained_tokens_per_episode", "trained tok/ep", ".0f"),
        ("datums_per_episode", "datums/ep", ".2f"),
        ("prefill_tokens_per_episode", "prefill tok/ep", ".0f"),
        ("no_reuse_tokens_per_episode", "no-reuse tok/ep", ".0f"),
        ("seconds_per_step", "s/step", ".1f"),
        ("thinking_after_warm_start", "think(ws)", ".2f"),
        ("thinking_after_rl", "think(rl)", ".2f"),
        ("reward_after_warm_start", "reward(ws)", ".3f"),
        ("reward_after_rl", "reward(rl)", ".3f"),
    ]
    print("way      " + " ".join(f"{h:>15}" for _, h, _ in cols))
    for name, fig in results.items():
        print(f"{name:<8} " + " ".join(f"{fig.get(k, float('nan')):>15{f}}" for k, _, f in cols))
    wall = (time.monotonic() - t_start) / 60
    cpu = sum(os.times()[:4]) / 60
    print(
        f"[bench] wall {wall:.1f} min, CPU {cpu:.1f} min; "
        f"load average at the end {load_end[0]:.1f} {load_end[1]:.1f} {load_end[2]:.1f}"
    )
    (out / "result.json").write_text(
        json.dumps(
            {"results": results, "load": [load, load_end], "wall_minutes": wall, "cpu_minutes": cpu}, indent=2
        )
        + "\n"
    )
    if not {"compact", "strip"} <= results.keys():
        return 0
    c, s = results["compact"], results["strip"]
    thinking = min(r["thinking_after_warm_start"] for r in results.values())
    print(
        f"ratio_trained_tokens_compact_vs_strip={_ratio(c['trained_tokens_per_episode'], s['trained_tokens_per_episode']):.3f} "
        f"ratio_prefill_tokens_compact_vs_strip={_ratio(c['prefill_tokens_per_episode'], s['prefill_tokens_per_episode']):.3f} "
        f"thinking_turn_fraction={thinking:.3f} "
        f"reward_gap_compact_vs_strip={c['reward_after_rl'] - s['reward_after_rl']:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
