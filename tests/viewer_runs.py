"""Synthetic run folders for the viewer's tests and bench (an evaluation of any size, a training run)."""

from __future__ import annotations

import json
import random
from pathlib import Path

STOPS = ("completed", "max_tokens", "max_turns", "parse_error")
FAULTS = ("", "", "", "truncated", "malformed")
_WORDS = [w for w in ["the", "a", "box", "boxed", "{", "}", "1", "2", "3", "4", "5", "6", "7", "8", "9", "0", "pens", "books", "How", "many", "does", "he", "have", "?", "Write", "your", "final", "answer", "in", "\\", ".", ",", "=", "+", "-", "*", "/", "Tom", "Emma", "buys", "packs", "each", "uses", "left", "then", "with", "of", "to", "is", "are", "so", "we", "get", "<|im_start|>", "<|im_end|>", "user", "assistant", "\n", "ed", "ing", "s"]]  # fmt: skip
_VOCAB = _WORDS + [f" w{i}" for i in range(400)]


def _tokens(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(_VOCAB) for _ in range(n)]


def write_eval_run(folder: Path, episodes: int = 1000, seed: int = 0) -> list[dict]:
    """An evaluation folder (config, summary, episodes.jsonl) of ``episodes`` 3-turn episodes with
    a 110-token prompt and 40-token actions; returns the rows."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    prompt = _tokens(rng, 90)
    rows = []
    for i in range(episodes):
        turns = []
        breaks = 0
        for k in range(3):
            turn = {"ob": (prompt + _tokens(rng, 20)) if k == 0 else _tokens(rng, 15), "ac": _tokens(rng, 40),
                    "reward": 0.0}  # fmt: skip
            if k == 2 and i % 7 == 3:
                turn["break"] = {"at": 150, "expected": False, "before": "system\nTurns so far: ", "was": "1", "now": "2"}
                breaks = 1
            turns.append(turn)
        reward = round(rng.random(), 3) if i % 5 else -0.1
        turns[-1]["reward"] = reward
        turns[-1]["metrics"] = {"correct": float(reward > 0.5)}
        if i == 0:
            turns[0]["ac"] = ["</script><b>x</b>", "&amp;"]  # must be shown as text, never parsed
        rows.append({"task": i, "repeat": 0, "seed": i, "slot": 0, "reward": reward, "stop": STOPS[i % 4],
                     "fault": FAULTS[i % 5], "breaks": breaks, "expected_breaks": 0, "turns": 3,
                     "sampled_tokens": 120, "seconds": 0.1, "metrics": {"correct": float(reward > 0.5)},
                     "transcript": turns})  # fmt: skip
    (folder / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "config.json").write_text(json.dumps({"config": {"env": "synthetic/Run-v0"}, "extension_check": "full"}))
    (folder / "summary.json").write_text(json.dumps({"episodes": episodes, "reward/mean": 0.4}))
    return rows


def write_training_run(folder: Path, steps: int = 12) -> None:
    """A training run folder (metrics.jsonl, eval.jsonl, config.json, one transcript page)."""
    folder.mkdir(parents=True, exist_ok=True)
    metrics = [{"step": s, "reward/mean": 0.1 + 0.05 * s, "win_rate": 0.02 * s} for s in range(steps)]
    evals = [{"step": s, "eval/reward/mean": 0.2 + 0.04 * s, "eval/win_rate": 0.03 * s} for s in range(0, steps + 1, 4)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    (folder / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evals))
    (folder / "config.json").write_text(json.dumps({"model_name": "tiny"}))
    (folder / "transcripts").mkdir(exist_ok=True)
    (folder / "transcripts" / "eval_step0000.html").write_text("<html></html>")
