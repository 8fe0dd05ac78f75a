"""Metric summary of a batch of :class:`GroupOutcome` s (flat ``dict[str, float]`` for loggers).

Keys (all floats):

- ``groups/{requested,completed,failed}``, ``rollouts/{requested,completed,failed,retries}``:
  ``requested == completed + failed`` at both levels, always.
- ``failures/<ErrorType>`` and ``failures/total``: every failure event (retried attempts too).
- ``stop/<reason>``: how many kept trajectories ended for each reason.
- ``traj/turns_mean``, ``traj/datums_per_traj``, ``traj/ext_breaks``,
  ``traj/ext_breaks_unexpected``, ``traj/compactions``, ``traj/compaction_unsupported``
  (trajectories whose env could not honour a requested compaction), ``traj/sampled_tokens``.
- ``tokens/unique``, ``tokens/trained``, ``tokens/per_turn`` and
  ``tokens/trained_over_unique`` (1.0 when nothing is trained twice).
- ``reward/mean``, ``reward/std`` over kept trajectories; ``time/group_s_mean``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from rollout._results import GroupOutcome


def summarize(outcomes: Iterable[GroupOutcome]) -> dict[str, float]:
    """Aggregate outcomes into the batch metrics described in the module docstring."""
    outcomes = list(outcomes)
    m: dict[str, float] = {}
    kept = [o for o in outcomes if o.group is not None]
    m["groups/requested"] = float(len(outcomes))
    m["groups/completed"] = float(len(kept))
    m["groups/failed"] = float(len(outcomes) - len(kept))
    m["rollouts/requested"] = float(sum(o.requested for o in outcomes))
    m["rollouts/completed"] = float(sum(o.completed for o in outcomes))
    m["rollouts/failed"] = float(sum(o.failed for o in outcomes))
    m["rollouts/retries"] = float(sum(o.retries for o in outcomes))
    failures = Counter(e.error_type for o in outcomes for e in o.errors)
    for kind, count in sorted(failures.items()):
        m[f"failures/{kind}"] = float(count)
    m["failures/total"] = float(sum(failures.values()))
    stats = [s for o in kept for s in o.stats]
    stops = Counter(s.stop_reason or "unknown" for s in stats)
    for reason, count in sorted(stops.items()):
        m[f"stop/{reason}"] = float(count)
    n = len(stats)
    m["traj/count"] = float(n)
    if n:
        m["traj/turns_mean"] = sum(s.turns for s in stats) / n
        m["traj/datums_per_traj"] = sum(s.datums for s in stats) / n
    m["traj/ext_breaks"] = float(sum(len(s.breaks) for s in stats))
    m["traj/ext_breaks_unexpected"] = float(sum(s.unexpected_breaks for s in stats))
    m["traj/compactions"] = float(sum(s.compactions for s in stats))
    m["traj/compaction_unsupported"] = float(sum(s.compaction_unsupported for s in stats))
    m["traj/sampled_tokens"] = float(sum(s.sampled_tokens for s in stats))
    unique = sum(s.tokens_unique for s in stats)
    trained = sum(s.tokens_trained for s in stats)
    m["tokens/unique"] = float(unique)
    m["tokens/trained"] = float(trained)
    m["tokens/per_turn"] = float(sum(s.tokens_per_turn for s in stats))
    if unique:
        m["tokens/trained_over_unique"] = trained / unique
    rewards = [r for o in kept for r in o.group.get_total_rewards()]  # type: ignore[union-attr]
    if rewards:
        mean = sum(rewards) / len(rewards)
        m["reward/mean"] = mean
        m["reward/std"] = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    if outcomes:
        m["time/group_s_mean"] = sum(o.elapsed_s for o in outcomes) / len(outcomes)
    return m
