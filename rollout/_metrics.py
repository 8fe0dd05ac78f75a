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
    """Aggregate outcomes into the batch metrics described in the module docstring.

    One pass over the outcomes and one over the kept trajectories (it runs once per batch, but
    over every trajectory: integer totals are accumulated exactly, float sums keep ``sum`` over
    the values in the order the cookbook's ``get_total_rewards`` sums them).
    """
    outcomes = list(outcomes)
    m: dict[str, float] = {}
    requested = completed = failed = retries = 0
    failures: Counter[str] = Counter()
    kept: list[GroupOutcome] = []
    for o in outcomes:
        requested += o.requested
        completed += o.completed
        failed += o.failed
        retries += o.retries
        for e in o.errors:
            failures[e.error_type] += 1
        if o.group is not None:
            kept.append(o)
    m["groups/requested"] = float(len(outcomes))
    m["groups/completed"] = float(len(kept))
    m["groups/failed"] = float(len(outcomes) - len(kept))
    m["rollouts/requested"] = float(requested)
    m["rollouts/completed"] = float(completed)
    m["rollouts/failed"] = float(failed)
    m["rollouts/retries"] = float(retries)
    for kind, count in sorted(failures.items()):
        m[f"failures/{kind}"] = float(count)
    m["failures/total"] = float(sum(failures.values()))
    stops: Counter[str] = Counter()
    n = turns = datums = breaks = unexpected = compactions = unsupported = sampled = 0
    unique = trained = per_turn = 0
    rewards: list[float] = []
    for o in kept:
        group = o.group
        assert group is not None
        for s in o.stats:
            n += 1
            stops[s.stop_reason or "unknown"] += 1
            turns += s.turns
            datums += s.datums
            if s.breaks:
                breaks += len(s.breaks)
                unexpected += s.unexpected_breaks
                compactions += s.compactions
            unsupported += s.compaction_unsupported
            sampled += s.sampled_tokens
            unique += s.tokens_unique
            trained += s.tokens_trained
            per_turn += s.tokens_per_turn
        # == group.get_total_rewards(), without a generator per trajectory
        for trajectory, final_reward in zip(group.trajectories_G, group.final_rewards_G, strict=True):
            rewards.append(sum([t.reward for t in trajectory.transitions]) + final_reward)
    for reason, count in sorted(stops.items()):
        m[f"stop/{reason}"] = float(count)
    m["traj/count"] = float(n)
    if n:
        m["traj/turns_mean"] = turns / n
        m["traj/datums_per_traj"] = datums / n
    m["traj/ext_breaks"] = float(breaks)
    m["traj/ext_breaks_unexpected"] = float(unexpected)
    m["traj/compactions"] = float(compactions)
    m["traj/compaction_unsupported"] = float(unsupported)
    m["traj/sampled_tokens"] = float(sampled)
    m["tokens/unique"] = float(unique)
    m["tokens/trained"] = float(trained)
    m["tokens/per_turn"] = float(per_turn)
    if unique:
        m["tokens/trained_over_unique"] = trained / unique
    if rewards:
        mean = sum(rewards) / len(rewards)
        m["reward/mean"] = mean
        m["reward/std"] = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    if outcomes:
        m["time/group_s_mean"] = sum(o.elapsed_s for o in outcomes) / len(outcomes)
    return m
