"""The seam between the loop and the rollout engine: batches of groups in, trajectory groups out.

Everything the loop needs from rollouts goes through :func:`sample_batch` (the ``rollout``
package's :class:`~rollout.RolloutEngine`: concurrent groups, per-turn token budget, failure
accounting, run-time extension check) and :func:`to_datums` (:func:`rollout.assemble`, i.e. the
cookbook's advantages and ``trajectory_to_data``), so switching engines touches only this module.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio
import tinker
from tinker_cookbook.completers import StopCondition, TinkerTokenCompleter, TokenCompleter, TokensWithLogprobs
from tinker_cookbook.rl.types import EnvGroupBuilder, TrajectoryGroup

from backend.seeding import mix_seed
from rollout import (
    AdvantageConfig,
    BatchResult,
    EngineConfig,
    GroupOutcome,
    RolloutEngine,
    RolloutLimits,
    SampleCall,
    Strategy,
    assemble,
    summarize,
)

if TYPE_CHECKING:
    from training._executors import RolloutExecutor, WorkerSampler

logger = logging.getLogger(__name__)


class AllGroupsFailedError(RuntimeError):
    """Every group of a batch failed during rollout (the first error is in the message)."""


@dataclass
class SampledBatch:
    """The outcome of rolling out one batch of env groups with one sampler version."""

    builders: list[EnvGroupBuilder]
    """Builders of the groups that succeeded (aligned with :attr:`groups`)."""
    groups: list[TrajectoryGroup]
    """Trajectory groups that succeeded."""
    sampler_step: int
    """Training step whose weights sampled this batch (for off-policy staleness)."""
    seconds: float
    """Wall-clock time of the rollouts."""
    failed: int = 0
    """Groups lost to a failure."""
    errors: list[str] = field(default_factory=list)
    """One line per failed group."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The engine's batch summary (``rollout.summarize`` keys)."""
    sampler_metrics: dict[str, float] = field(default_factory=dict)
    """The sampler's own counters for this batch, when it has them (``sampler/prefill_tokens``,
    ``sampler/reused_tokens`` on the local backend)."""


@runtime_checkable
class SupportsSeatedRollout(Protocol):
    """A group builder that plays itself: a multi-seat game (``envs.seats.SeatedGroupBuilder``)
    whose seats are driven by one game loop rather than by the engine stepping each env alone.

    ``rollout_seated(policy, config, index)`` plays the group with ``policy`` on the policy's seats
    and returns one ``rollout.GroupOutcome`` per trajectory group it makes (one per training role);
    :func:`sample_batch` uses it instead of the rollout engine for such builders.
    """

    async def rollout_seated(
        self, policy: TokenCompleter, config: EngineConfig | None = None, index: int = 0
    ) -> Sequence[GroupOutcome]:
        """Play the group; its trajectory groups with the engine's accounting."""
        ...


@dataclass(frozen=True)
class _Remote:
    """Plain groups go to ``executor``'s workers, which reach the policy through ``sampler``."""

    executor: RolloutExecutor
    sampler: WorkerSampler
    max_tokens: int
    temperature: float

    async def run_batch(
        self, builders: Sequence[EnvGroupBuilder], config: EngineConfig, indices: Sequence[int] | None = None
    ) -> BatchResult:
        policy = functools.partial(
            SeededTokenCompleter, max_tokens=self.max_tokens, temperature=self.temperature
        )
        return await self.executor.run_batch(builders, self.sampler, policy, config, indices=indices)


async def _run_mixed(
    builders: Sequence[EnvGroupBuilder],
    policy: TokenCompleter,
    config: EngineConfig,
    remote: _Remote | None = None,
) -> BatchResult:
    """The engine's batch for plain builders (in ``remote``'s workers when given), ``rollout_seated``
    for seated ones (always in this process), concurrently; outcomes in builder order (a seated
    builder gives one per role group)."""
    per_builder: list[list[GroupOutcome]] = [[] for _ in builders]
    plain = [i for i, b in enumerate(builders) if not isinstance(b, SupportsSeatedRollout)]
    t0 = time.monotonic()

    async def seated(i: int) -> None:
        builder = builders[i]
        assert isinstance(builder, SupportsSeatedRollout)
        per_builder[i] = list(await builder.rollout_seated(policy, config, i))

    async def engine() -> None:
        if remote is not None:
            result = await remote.run_batch([builders[i] for i in plain], config, plain)
            for o in result.outcomes:
                per_builder[o.index] = [o]
            return
        result = await RolloutEngine(policy, config).run_batch([builders[i] for i in plain])
        for o in result.outcomes:
            per_builder[plain[o.index]] = [o]

    async with anyio.create_task_group() as tg:
        if plain:
            tg.start_soon(engine)
        for i, b in enumerate(builders):
            if isinstance(b, SupportsSeatedRollout):
                tg.start_soon(seated, i)
    outcomes = tuple(o for group in per_builder for o in group)
    return BatchResult(outcomes=outcomes, metrics=summarize(outcomes), elapsed_s=time.monotonic() - t0)


def batch_seed(run_seed: int, kind: str, step: int) -> int:
    """The seed of the batch of ``kind`` (``"train"``, ``"eval"``) at ``step`` of a run."""
    return mix_seed(run_seed, kind, step)


def call_seed(call: SampleCall) -> int:
    """The sampling seed of one policy call of a seeded engine: its seed and place, mixed."""
    return mix_seed(call.seed, call.group, call.slot, call.attempt, call.turn)


@dataclass
class SeededTokenCompleter(TinkerTokenCompleter):
    """The cookbook's ``TinkerTokenCompleter`` whose sampling requests carry a seed: the engine's
    per-call one (:func:`call_seed` of the ``call`` a seeded engine passes, see
    ``rollout.EngineConfig.seed``), else :attr:`seed` when set, else none.

    Without per-call seeds a sampler seeds a request from its prompt and arrival order, so where
    several envs of a group send the same prompt, which env gets which sample depends on timing:
    two runs with one seed drift apart. Seeds are :data:`backend.seeding.SEED_BITS` wide, which
    every Tinker service accepts.
    """

    seed: int | None = None
    """Seed of the calls that come without a ``call`` (e.g. from the cookbook's own rollouts)."""

    async def __call__(
        self,
        model_input: tinker.ModelInput,
        stop: StopCondition,
        *,
        max_tokens: int | None = None,
        call: SampleCall | None = None,
    ) -> TokensWithLogprobs:
        """Sample as ``TinkerTokenCompleter`` does, with the call's seed."""
        max_tokens = self.max_tokens if max_tokens is None else min(self.max_tokens, max_tokens)
        if self.context_window is not None:
            max_tokens = min(max_tokens, self.context_window - model_input.length)
            if max_tokens <= 0:
                raise ValueError(
                    f"Prompt length ({model_input.length}) exceeds context window "
                    f"({self.context_window}). No room for generation."
                )
        seed = call_seed(call) if call is not None else self.seed
        response = await self.sampling_client.sample_async(
            prompt=model_input,
            num_samples=1,
            sampling_params=tinker.SamplingParams(
                stop=stop, max_tokens=max_tokens, temperature=self.temperature, seed=seed
            ),
        )
        sequence = response.sequences[0]
        assert sequence.logprobs is not None
        return TokensWithLogprobs(
            tokens=sequence.tokens, maybe_logprobs=sequence.logprobs, stop_reason=sequence.stop_reason
        )


def rollout_config(
    max_tokens: int, *, compaction_period: int = 0, max_retries: int = 1, seed: int | None = None
) -> EngineConfig:
    """The engine settings of the loop's rollouts (also used to play a warm start's scripted
    episodes, so they are rendered and split exactly like RL episodes)."""
    return EngineConfig(
        limits=RolloutLimits(max_turn_tokens=max_tokens),
        strategy=Strategy.retry(max_retries) if max_retries else Strategy.fail_fast(),
        max_concurrent_samples=None,
        compaction_period=compaction_period or None,
        seed=seed,
    )


async def sample_batch(
    builders: Sequence[EnvGroupBuilder],
    sampling_client: Any,
    *,
    max_tokens: int,
    temperature: float,
    sampler_step: int,
    max_retries: int = 1,
    compaction_period: int = 0,
    seed: int | None = None,
    executor: RolloutExecutor | None = None,
    worker_sampler: WorkerSampler | None = None,
) -> SampledBatch:
    """Roll out every group of ``builders`` concurrently with ``sampling_client``.

    A failed rollout is retried on a fresh env (``max_retries`` per group); a group that still
    fails is dropped and counted; a multi-seat builder (:class:`SupportsSeatedRollout`) plays
    itself and gives one group per training role; when all groups fail, :class:`AllGroupsFailedError` is raised.
    ``compaction_period > 0`` asks every env to compact its history that often
    (:func:`rollout_config`). With a ``seed``, every request is seeded by its place in the
    batch (the engine's ``seed``, :class:`SeededTokenCompleter`), so the same seed samples the
    same tokens for each env. With an ``executor`` (``training._executors``), plain groups run in
    its workers, which sample through ``worker_sampler`` (default: ``sampling_client`` pickled, a
    Tinker client); the outcomes are the ones an in-process run gives.
    """
    remote = None
    if executor is not None:
        from training._executors import worker_sampler_of

        sampler = worker_sampler if worker_sampler is not None else worker_sampler_of(sampling_client)
        remote = _Remote(executor, sampler, max_tokens, temperature)
    policy = SeededTokenCompleter(sampling_client, max_tokens=max_tokens, temperature=temperature)
    config = rollout_config(
        max_tokens, compaction_period=compaction_period, max_retries=max_retries, seed=seed
    )
    builders = list(builders)
    if any(isinstance(b, SupportsSeatedRollout) for b in builders):
        result = await _run_mixed(builders, policy, config, remote)
    elif remote is not None:
        result = await remote.run_batch(builders, config)
    else:
        result = await RolloutEngine(policy, config).run_batch(builders)
    kept = [o for o in result.outcomes if o.group is not None]
    failures = [o.failure for o in result.outcomes if o.failure is not None]
    errors = [f"{f.error_type}: {f.error_message}" for f in failures]
    if builders and not kept:
        raise AllGroupsFailedError(
            f"all {len(builders)} groups failed; first error: {errors[0] if errors else '?'}"
        )
    for line in errors:
        logger.warning("a rollout group failed: %s", line)
    return SampledBatch(
        builders=[o.builder for o in kept],
        groups=[o.group for o in kept if o.group is not None],
        sampler_step=sampler_step,
        seconds=result.elapsed_s,
        failed=len(failures),
        errors=errors,
        metrics=dict(result.metrics),
    )


def to_datums(
    groups: Sequence[TrajectoryGroup], advantages: AdvantageConfig | None = None
) -> tuple[list[tinker.Datum], dict[str, float]]:
    """Training datums of ``groups`` (group-centred advantages, as ``advantages`` says) and
    assembly metrics.

    Datums keep the ``mask`` input (needed for the KL metrics); strip it with
    :func:`without_mask` before sending them to a trainer.
    """
    assembled = assemble(list(groups), advantages or AdvantageConfig())
    return assembled.datums, assembled.metrics


def without_mask(datum: tinker.Datum) -> tinker.Datum:
    """The datum without its ``mask`` input (Tinker's losses do not take one)."""
    return tinker.Datum(
        model_input=datum.model_input,
        loss_fn_inputs={k: v for k, v in datum.loss_fn_inputs.items() if k != "mask"},
    )
