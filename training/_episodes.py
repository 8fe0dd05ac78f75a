"""Episodes as JSON rows: outcome, metrics and a transcript with its token boundaries.

One row per episode (``episode_row``): the total reward (step rewards + group reward), the stop
reason, extension breaks, summed step metrics, and the transcript: per turn the new observation
tokens and the action tokens, each decoded on its own (the token boundaries), the turn's reward,
metrics and logs, and at a break (an observation that does not extend the previous observation +
action) the decoded diff at the divergence. ``python -m envs.eval`` writes these rows
(``episodes.jsonl``), and so does the training loop for its held-out evaluations
(``eval_episodes.jsonl``, keyed by ``step``); ``python -m envs.viewer`` shows them.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tinker_cookbook.rl.types import STOP_METRIC_PREFIX, Trajectory, TrajectoryGroup

from rollout import METRIC_COMPACTION

DIFF_WINDOW = 24
"""Tokens of context shown on each side of an extension break's divergence."""
EVAL_EPISODES_FILE = "eval_episodes.jsonl"
"""A training run's held-out episodes, one row each, with the ``step`` they were evaluated after."""


def _pieces(tokenizer: Any, tokens: Sequence[int]) -> list[str]:
    """Each token decoded on its own (the token boundaries of the transcript)."""
    try:
        return tokenizer.batch_decode([[t] for t in tokens])
    except Exception:
        return [f"<{t}>" for t in tokens]


def _decode(tokenizer: Any, tokens: Sequence[int]) -> str:
    try:
        return tokenizer.decode(list(tokens))
    except Exception:
        return f"<{len(tokens)} tokens>"


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def episode_row(
    key: dict[str, int],
    tokenizer: Any,
    traj: Trajectory,
    *,
    group_reward: float = 0.0,
    group_metrics: dict[str, Any] | None = None,
    unexpected_breaks: set[int] | None = None,
    stop_reason: str | None = None,
    sampled_tokens: int | None = None,
    seconds: float | None = None,
) -> dict[str, Any]:
    """One episode as a JSON-ready row (see the module docstring). ``unexpected_breaks``: the turns
    whose break the engine did not expect (``rollout.TrajectoryStats.breaks``); None: every break
    is unexpected except one right after a compaction (the engine's ``rollout/compaction`` metric)."""
    metrics: dict[str, float] = {}
    turns: list[dict[str, Any]] = []
    seen: list[int] = []
    unexpected: set[int] = set()
    expected = 0
    compacted = False
    for i, t in enumerate(traj.transitions):
        ob = t.ob.to_ints()
        row: dict[str, Any] = {}
        if ob[: len(seen)] == seen:
            new = ob[len(seen) :]
        else:
            k = next((j for j, (a, b) in enumerate(zip(seen, ob, strict=False)) if a != b), min(len(seen), len(ob)))
            surprise = (i in unexpected_breaks) if unexpected_breaks is not None else not compacted
            if surprise:
                unexpected.add(i)
            else:
                expected += 1
            row["break"] = {
                "at": k,
                "expected": not surprise,
                "before": _decode(tokenizer, seen[max(0, k - DIFF_WINDOW) : k]),
                "was": _decode(tokenizer, seen[k : k + DIFF_WINDOW]),
                "now": _decode(tokenizer, ob[k : k + DIFF_WINDOW]),
            }
            new = ob
        compacted = bool(t.metrics.get(METRIC_COMPACTION))
        ac = list(t.ac.tokens)
        row.update(ob=_pieces(tokenizer, new), ac=_pieces(tokenizer, ac), reward=_finite(t.reward))
        step_metrics = {k: _finite(v) for k, v in t.metrics.items() if not k.startswith(STOP_METRIC_PREFIX)}
        if step_metrics:
            row["metrics"] = step_metrics
        if t.logs:
            row["logs"] = {k: str(v) for k, v in t.logs.items()}
        for name, value in t.metrics.items():
            if not name.startswith(STOP_METRIC_PREFIX) and isinstance(value, int | float):
                metrics[name] = metrics.get(name, 0.0) + float(value)
        turns.append(row)
        seen = ob + ac
    total = float(sum(t.reward for t in traj.transitions)) + group_reward
    return {
        **key,
        "reward": _finite(total),
        "stop": str(stop_reason or traj.stop_reason or ""),
        "breaks": len(unexpected),
        "expected_breaks": expected,
        "turns": len(traj.transitions),
        "sampled_tokens": sampled_tokens if sampled_tokens is not None else sum(len(t.ac.tokens) for t in traj.transitions),
        "seconds": round(seconds, 3) if seconds is not None else None,
        "metrics": {k: _finite(v) for k, v in {**metrics, **(group_metrics or {})}.items()},
        "transcript": turns,
    }


def append_rows(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append rows durably, in one write (a batch is written whole or, after a kill, as a torn
    last line that readers drop)."""
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_eval_episodes(path: Path, step: int, tokenizer: Any, groups: Sequence[TrajectoryGroup]) -> None:
    """Append every episode of a held-out evaluation after ``step`` updates to ``path``."""
    rows = [
        episode_row(
            {"step": step, "task": g, "repeat": 0, "slot": i},
            tokenizer,
            traj,
            group_reward=float(group.final_rewards_G[i]),
            group_metrics=dict(group.metrics_G[i]),
        )
        for g, group in enumerate(groups)
        for i, traj in enumerate(group.trajectories_G)
    ]
    append_rows(path, rows)
