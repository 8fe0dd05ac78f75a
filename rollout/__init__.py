"""The rollout engine: run episodes of any ``tinker_cookbook.rl.types`` env with any
``TokenCompleter``, and turn them into training data.

Abstractions:

- :class:`EngineConfig`: the per-rollout limits (the cookbook's own ``RolloutLimits``), the step
  deadline, the error :class:`Strategy`, global concurrency caps, compaction
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
- :func:`current_sample_call`: the :class:`SampleCall` (group, slot, attempt, turn) of the policy
  call the engine is making, for completers and clients that key work on a call's place (the
  training loop's per-call seeds).

Typical training-loop use::

    engine = RolloutEngine(policy, EngineConfig(limits=RolloutLimits(max_turns=8), strategy=Strategy.retry(2)))
    result = await engine.run_batch(dataset.get_batch(i))
    data = assemble(result.groups, AdvantageConfig(normalize_std=True))
    log(result.metrics | data.metrics); train_on(data.datums)

Why our own loop beside the cookbook's ``rollout_runner.run_rollout`` (decision of #17)
---------------------------------------------------------------------------------------
The cookbook 0.5.8 runner takes ``RolloutLimits`` and ``RolloutHooks`` (``on_turn_begin``,
``on_stop_reason``, ``on_grade``, ``on_artifacts``), and its strategies (``FailFast``,
``RetryOnFailure``, ``MinViableGroup``) run a group with ``asyncio.gather``. We keep our engine
and build it on the cookbook's pieces instead of on that runner, because the runner cannot host
what is ours at equal speed:

- no hook runs between ``env.step`` and the next sampling call with the action and the new
  observation, which is where the extension check and the datum/token accounting belong (from
  ``on_turn_begin`` they would have to re-derive both from ``RolloutState.transitions``, and the
  final observation is never seen);
- the sampling and step gates must wrap exactly the policy call and the ``env.step`` call; the
  runner offers no seam there (wrapping the policy and the env in proxies adds two awaits and
  two objects per turn), and its ``asyncio.timeout`` / ``asyncio.gather`` tie it to asyncio
  where our engine is anyio (structured cancellation of a group, shielded cleanup, trio);
- per turn it builds a ``RolloutState`` for each hook call and opens a ``trace.scope_span``
  around the sample and the step; our loop opens nothing per turn unless a per-call deadline is
  set. ``bench/rollout_engine.py`` measured ours ~1.9x the cookbook's group rollout.

So the loop is ours, with the cookbook's semantics (``tests/test_rollout_parity.py`` pins
identical trajectories) and the cookbook's pieces wherever they fit: ``RolloutLimits`` for the
budgets, ``stop_reason_from_metrics``, ``TRUNCATION_METRIC_KEY``, ``SamplingTurnTimeoutError``,
the ``set_max_tool_calls`` seam, ``StopReason``, ``Trajectory`` / ``TrajectoryGroup`` /
``RolloutError``, ``trajectory_to_data`` / ``compute_advantages``; the completers are the
cookbook's (``TinkerTokenCompleter`` serves tinker's and our local sampling clients alike).
No public name here means something else in the cookbook: our config is :class:`EngineConfig`
(the cookbook's ``RolloutConfig`` bundles env-side policies), one episode is
:func:`run_episode` (``policy, env`` like the cookbook's ``run_rollout``, but returning
``(Trajectory, TrajectoryStats)``); ``tests/test_public_api.py`` checks every name against the
cookbook's modules.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
