"""The reward curve: ``reward_curve.png`` in the run folder, redrawn after every step.

Top panel: training reward (mean with a one-std band) and, when evaluated, held-out reward.
Bottom panel: training win rate and held-out win rate; the first and the last held-out points
are labelled with their values (after the warm start, or untrained, at step 0; after the RL
steps at the end), so each stage's result reads off the image. matplotlib with the Agg backend;
the PNG is written to a temporary file and renamed, so a reader never sees a half-written image.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PLOT_FILE = "reward_curve.png"


def _series(rows: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for row in rows:
        value = row.get(key)
        if isinstance(value, int | float):
            xs.append(int(row["step"]))
            ys.append(float(value))
    return xs, ys


def _stage_labels(rows: Sequence[dict[str, Any]], key: str, warm_start: bool) -> list[tuple[int, float, str]]:
    """Labels of the held-out points that close a stage: at step 0 the policy before any training
    and the one after the warm start (rows name their ``stage``; a row without one is "after warm
    start" when the run had one, else "untrained"), and the last one (after that many RL steps)."""
    labels: list[tuple[int, float, str]] = []
    points = [
        (int(r["step"]), float(r[key]), r.get("stage")) for r in rows if isinstance(r.get(key), int | float)
    ]
    for x, y, stage in points:
        if x == 0:
            after_warm = stage == "warm_start" or (stage is None and warm_start)
            labels.append((0, y, "after warm start" if after_warm else "untrained"))
    if points and points[-1][0] > 0:
        labels.append((points[-1][0], points[-1][1], f"after {points[-1][0]} RL steps"))
    return labels


def plot_reward_curve(
    path: Path,
    train_rows: Sequence[dict[str, Any]],
    eval_rows: Sequence[dict[str, Any]],
    *,
    title: str = "",
    warm_start: bool = False,
) -> Path:
    """Draw the reward and win-rate curves of a run into ``path`` (PNG); return ``path``.

    ``warm_start``: the run had a warm start, so a held-out point at step 0 that names no
    ``stage`` is labelled "after warm start" (else "untrained")."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, (ax_r, ax_w) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    try:
        xs, mean = _series(train_rows, "reward/mean")
        _, std = _series(train_rows, "reward/std")
        if xs:
            ax_r.plot(xs, mean, marker="o", ms=3, label="train reward")
            if len(std) == len(mean):
                ax_r.fill_between(
                    xs,
                    [m - s for m, s in zip(mean, std, strict=True)],
                    [m + s for m, s in zip(mean, std, strict=True)],
                    alpha=0.2,
                )
        ex, ey = _series(eval_rows, "eval/reward/mean")
        if ex:
            ax_r.plot(ex, ey, marker="s", ls="--", label="held-out reward")
        ax_r.set_ylabel("reward")
        ax_r.grid(alpha=0.3)
        ax_r.legend(loc="best", fontsize=8)

        wx, wy = _series(train_rows, "win_rate")
        if wx:
            ax_w.plot(wx, wy, marker="o", ms=3, label="train win rate")
        ewx, ewy = _series(eval_rows, "eval/win_rate")
        if ewx:
            ax_w.plot(ewx, ewy, marker="s", ls="--", label="held-out win rate")
            for x, y, text in _stage_labels(eval_rows, "eval/win_rate", warm_start):
                ax_w.annotate(
                    f"{text}: {y:.2f}",
                    (x, y),
                    textcoords="offset points",
                    xytext=(4, -12 if y > 0.9 else 6),
                    fontsize=8,
                )
        ax_w.set_ylim(-0.05, 1.05)
        ax_w.set_xlabel("step (eval: after that many steps)")
        ax_w.set_ylabel("win rate")
        ax_w.grid(alpha=0.3)
        ax_w.legend(loc="best", fontsize=8)
        if title:
            fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".tmp.png")
        fig.savefig(tmp, dpi=90)
        os.replace(tmp, path)
    finally:
        plt.close(fig)
    return path
