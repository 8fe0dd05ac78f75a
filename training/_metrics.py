"""Per-batch metrics of trajectory groups and training outputs.

Keys (one flat dict per step; the same keys with an ``eval/`` prefix in ``eval.jsonl``):

- ``reward/mean``, ``reward/std``: total reward per trajectory (step rewards + group reward);
- ``win_rate``: fraction of trajectories that won (see :func:`trajectory_won`);
- ``turns/mean``: assistant turns per trajectory;
- ``tokens/sampled``, ``tokens/observation``: action tokens and observation tokens of the batch;
- ``groups/total``, ``groups/trained``, ``groups/failed``: groups sampled, kept for training
  (after removing constant-reward groups), and lost to rollout errors;
- ``env/all/...``: the cookbook's per-env aggregates (turns, tokens, every env metric, by-group).

The training loop adds the engine's batch summary under ``rollout/`` (``rollout.summarize``: the
one datums-per-trajectory figure is ``rollout/traj/datums_per_traj``, the one extension-break
count ``rollout/traj/ext_breaks``) and ``datums``, the datums trained on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tinker_cookbook.rl.metric_util import compute_trajectory_metrics
from tinker_cookbook.rl.types import Trajectory, TrajectoryGroup


def trajectory_won(
    traj: Trajectory, group_metrics: dict[str, float | int], total_reward: float, key: str
) -> bool:
    """Whether a trajectory won: its ``key`` metric (summed over turns and the group metrics)
    is positive, or, when the env never reports ``key``, its total reward is positive."""
    values = [float(t.metrics[key]) for t in traj.transitions if key in t.metrics]
    if key in group_metrics:
        values.append(float(group_metrics[key]))
    if values:
        return sum(values) > 0
    return total_reward > 0


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _std(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def group_metrics(
    groups: Sequence[TrajectoryGroup],
    *,
    win_metric: str = "win",
    tags: Sequence[Sequence[str]] | None = None,
) -> dict[str, float]:
    """Summary metrics of a batch of trajectory groups (see the module docstring)."""
    rewards: list[float] = []
    wins: list[float] = []
    turns: list[float] = []
    sampled = observation = 0
    for group in groups:
        for traj, total, gm in zip(
            group.trajectories_G, group.get_total_rewards(), group.metrics_G, strict=True
        ):
            rewards.append(total)
            wins.append(1.0 if trajectory_won(traj, gm, total, win_metric) else 0.0)
            turns.append(float(len(traj.transitions)))
            for t in traj.transitions:
                sampled += len(t.ac.tokens)
                observation += t.ob.length
    out: dict[str, float] = {
        "reward/mean": _mean(rewards),
        "reward/std": _std(rewards),
        "win_rate": _mean(wins),
        "turns/mean": _mean(turns),
        "episodes": float(len(rewards)),
        "tokens/sampled": float(sampled),
        "tokens/observation": float(observation),
        "groups/total": float(len(groups)),
    }
    if groups:
        taglist = [list(t) for t in tags] if tags is not None else [[] for _ in groups]
        out.update({k: float(v) for k, v in compute_trajectory_metrics(list(groups), taglist).items()})
    return out
