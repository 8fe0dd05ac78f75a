"""The rollout engine: run episodes of any ``tinker_cookbook.rl.types`` env with any
``TokenCompleter``, and turn them into training data.

Abstractions:

- :class:`EngineConfig`: the per-rollout limits (the cookbook's own ``RolloutLimits``), the step
  deadline, the error :class:`Strategy`, global concurrency caps (``anyio.CapacityLimiter`` s), compaction
  period, run-time :class:`ExtensionCheck` mode, reward/cleanup deadlines.
- :class:`SupportsCompaction`: the seam through which the engine asks an env to compact its
  history every N turns (``set_compaction_period``); :class:`CompactionUnsupported` when it
  cannot (see ``rollout._compaction``).
- :class:`RolloutEngine`: ``run_batch`` (all groups, in order), ``stream`` (groups as they
  finish), ``run_group``, ``run_episode``. Built on anyio task groups; nothing outlives a call.
- Results are the cookbook's own ``Trajectory`` / ``TrajectoryGroup`` (with ``rollout_errors``),
  wrapped in :class:`GroupOutcome` (accounting: requested = completed + failed) and
  :class:`BatchResult` (with :func:`summarize` metrics). :class:`TrajectoryStats` carries turns,
  extension breaks (:class:`ExtensionBreak`), datums, unique vs trained tokens.
- :func:`assemble` + :class:`AdvantageConfig`: groups -> ``tinker.Datum`` s (cookbook's
  ``trajectory_to_data`` by default; std normalisation and per-turn discounting as options);
  :func:`is_constant_group` / :func:`informative_groups`: the one constant-reward filter.
- :func:`write_jsonl` / :func:`write_html`: per-trajectory records and escaped transcripts.
- :class:`SampleCall`: with ``EngineConfig.seed`` set, the engine hands every policy call its
  place (seed, group, slot, attempt, turn) as ``call=``, from which the policy seeds its request
  (``training.SeededTokenCompleter``: the training loop's per-call seeds).

Typical training-loop use::

    engine = RolloutEngine(policy, EngineConfig(limits=RolloutLimits(max_turns=8), strategy=Strategy.retry(2)))
    result = await engine.run_batch(dataset.get_batch(i))
    data = assemble(result.groups, AdvantageConfig(normalize_std=True))
    log(result.metrics | data.metrics); train_on(data.datums)

Why the loop is ours, on the cookbook's pieces, rather than the cookbook's ``run_rollout``:
``docs/decisions/0017-own-rollout-loop.md``.
"""

from tinker_cookbook.rl.rollout_limits import RolloutLimits

from rollout._budget import effective_limits
from rollout._call import SampleCall
from rollout._compaction import (
    LOG_COMPACTION,
    METRIC_COMPACTION,
    METRIC_COMPACTION_UNSUPPORTED,
    CompactionUnsupported,
    SupportsCompaction,
    apply_compaction,
)
from rollout._config import AdvantageConfig, EngineConfig, ExtensionCheck, Strategy, StrategyKind
from rollout._datums import (
    Assembled,
    assemble,
    group_advantages,
    informative_groups,
    is_constant_group,
    trajectory_datums,
    trajectory_returns,
)
from rollout._engine import RolloutEngine, rollout_batch
from rollout._extension import ExtensionBreak
from rollout._logs import decoded_turns, render_html, trajectory_records, write_html, write_jsonl
from rollout._metrics import summarize
from rollout._results import (
    BatchAborted,
    BatchResult,
    CleanupTimeout,
    GroupBelowFloor,
    GroupOutcome,
    InvalidCompletion,
    InvalidGroup,
    RewardTimeout,
    RolloutFailure,
    StepTimeout,
    TrajectoryStats,
)
from rollout._runner import LOG_EXT_BREAK, METRIC_EXT_BREAK, run_episode
from rollout._strategy import run_group

__all__ = [
    "LOG_COMPACTION",
    "LOG_EXT_BREAK",
    "METRIC_COMPACTION",
    "METRIC_COMPACTION_UNSUPPORTED",
    "METRIC_EXT_BREAK",
    "AdvantageConfig",
    "Assembled",
    "BatchAborted",
    "BatchResult",
    "CleanupTimeout",
    "CompactionUnsupported",
    "EngineConfig",
    "ExtensionBreak",
    "ExtensionCheck",
    "GroupBelowFloor",
    "GroupOutcome",
    "InvalidCompletion",
    "InvalidGroup",
    "RewardTimeout",
    "RolloutEngine",
    "RolloutFailure",
    "RolloutLimits",
    "SampleCall",
    "StepTimeout",
    "Strategy",
    "StrategyKind",
    "SupportsCompaction",
    "TrajectoryStats",
    "apply_compaction",
    "assemble",
    "decoded_turns",
    "effective_limits",
    "group_advantages",
    "informative_groups",
    "is_constant_group",
    "render_html",
    "rollout_batch",
    "run_episode",
    "run_group",
    "summarize",
    "trajectory_datums",
    "trajectory_records",
    "trajectory_returns",
    "write_html",
    "write_jsonl",
]
