"""The rollout engine: run episodes of any ``tinker_cookbook.rl.types`` env with any
``TokenCompleter``, and turn them into training data.

Abstractions:

- :class:`EngineConfig`: the per-rollout limits (the cookbook's own ``RolloutLimits``), the step
  deadline, the error :class:`Strategy`, global concurrency caps (``anyio.Semaphore`` s), compaction
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
- :class:`ExtensionTracker` and :func:`apply_compaction`: the engine's per-turn extension check and
  compaction, for a loop of your own that drives several token histories (multi-seat games, ``envs.seats``).
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

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
