"""The rollout engine: run episodes of any ``tinker_cookbook.rl.types`` env with any
``TokenCompleter``, and turn them into training data.

Abstractions:

- :class:`RolloutConfig`: budgets (:class:`Budget`), error :class:`Strategy`, global concurrency
  caps, compaction period, run-time :class:`ExtensionCheck` mode, reward/cleanup deadlines.
- :class:`RolloutEngine`: ``run_batch`` (all groups, in order), ``stream`` (groups as they
  finish), ``run_group``, ``run_rollout``. Built on anyio task groups; nothing outlives a call.
- Results are the cookbook's own ``Trajectory`` / ``TrajectoryGroup`` (with ``rollout_errors``),
  wrapped in :class:`GroupOutcome` (accounting: requested = completed + failed) and
  :class:`BatchResult` (with :func:`summarize` metrics). :class:`TrajectoryStats` carries turns,
  extension breaks (:class:`ExtensionBreak`), datums, unique vs trained tokens.
- :func:`assemble` + :class:`AdvantageConfig`: groups -> ``tinker.Datum`` s (cookbook's
  ``trajectory_to_data`` by default; std normalisation and per-turn discounting as options).
- :func:`write_jsonl` / :func:`write_html`: per-trajectory records and escaped transcripts.

Typical training-loop use::

    engine = RolloutEngine(policy, RolloutConfig(budget=Budget(max_turns=8), strategy=Strategy.retry(2)))
    result = await engine.run_batch(dataset.get_batch(i))
    data = assemble(result.groups, AdvantageConfig(normalize_std=True))
    log(result.metrics | data.metrics); train_on(data.datums)
"""

from rollout._budget import effective_budget
from rollout._config import AdvantageConfig, Budget, ExtensionCheck, RolloutConfig, Strategy, StrategyKind
from rollout._datums import Assembled, assemble, group_advantages, trajectory_datums, trajectory_returns
from rollout._engine import RolloutEngine, rollout_batch
from rollout._extension import ExtensionBreak, ExtensionTracker, flat_tokens
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
    SampleTimeout,
    StepTimeout,
    TrajectoryStats,
)
from rollout._runner import LOG_EXT_BREAK, METRIC_EXT_BREAK, Gate, apply_compaction, run_rollout
from rollout._strategy import run_group

__all__ = [
    "LOG_EXT_BREAK",
    "METRIC_EXT_BREAK",
    "AdvantageConfig",
    "Assembled",
    "BatchAborted",
    "BatchResult",
    "Budget",
    "CleanupTimeout",
    "ExtensionBreak",
    "ExtensionCheck",
    "ExtensionTracker",
    "Gate",
    "GroupBelowFloor",
    "GroupOutcome",
    "InvalidCompletion",
    "InvalidGroup",
    "RewardTimeout",
    "RolloutConfig",
    "RolloutEngine",
    "RolloutFailure",
    "SampleTimeout",
    "StepTimeout",
    "Strategy",
    "StrategyKind",
    "TrajectoryStats",
    "apply_compaction",
    "assemble",
    "decoded_turns",
    "effective_budget",
    "flat_tokens",
    "group_advantages",
    "render_html",
    "rollout_batch",
    "run_group",
    "run_rollout",
    "summarize",
    "trajectory_datums",
    "trajectory_records",
    "trajectory_returns",
    "write_html",
    "write_jsonl",
]
