"""The seam between the loop and the rollout engine: batches of groups in, trajectory groups out.

Everything the loop needs from rollouts goes through :func:`sample_batch` and
:func:`to_datums`, so switching engines touches only this module.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import tinker
from tinker_cookbook.completers import TinkerTokenCompleter
from tinker_cookbook.rl.data_processing import assemble_training_data, compute_advantages
from tinker_cookbook.rl.rollouts import do_group_rollout
from tinker_cookbook.rl.types import EnvGroupBuilder, TrajectoryGroup

logger = logging.getLogger(__name__)


class AllGroupsFailedError(RuntimeError):
    """Every group of a batch raised during rollout (the first error is chained)."""


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
    """Groups lost to an exception."""
    errors: list[str] = field(default_factory=list)
    """One line per failed group."""


async def sample_batch(
    builders: Sequence[EnvGroupBuilder],
    sampling_client: Any,
    *,
    max_tokens: int,
    temperature: float,
    sampler_step: int,
) -> SampledBatch:
    """Roll out every group of ``builders`` concurrently with ``sampling_client``.

    A group that raises is dropped and counted; when all groups raise,
    :class:`AllGroupsFailedError` is raised with the first error.
    """
    policy = TinkerTokenCompleter(sampling_client, max_tokens=max_tokens, temperature=temperature)
    results: list[TrajectoryGroup | BaseException | None] = [None] * len(builders)

    async def one(i: int, builder: EnvGroupBuilder) -> None:
        try:
            results[i] = await do_group_rollout(builder, policy)
        except Exception as exc:  # one bad group must not kill the run
            results[i] = exc

    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        for i, builder in enumerate(builders):
            tg.start_soon(one, i, builder)
    seconds = anyio.current_time() - start

    ok_builders: list[EnvGroupBuilder] = []
    groups: list[TrajectoryGroup] = []
    errors: list[BaseException] = []
    for builder, result in zip(builders, results, strict=True):
        if isinstance(result, TrajectoryGroup):
            ok_builders.append(builder)
            groups.append(result)
        elif isinstance(result, BaseException):
            errors.append(result)
    if builders and not groups:
        raise AllGroupsFailedError(
            f"all {len(builders)} groups failed; first error: {errors[0]!r}"
        ) from errors[0]
    for exc in errors:
        logger.warning("a rollout group failed: %r", exc)
    return SampledBatch(
        builders=ok_builders,
        groups=groups,
        sampler_step=sampler_step,
        seconds=seconds,
        failed=len(errors),
        errors=[f"{type(e).__name__}: {e}" for e in errors],
    )


def to_datums(groups: Sequence[TrajectoryGroup]) -> tuple[list[tinker.Datum], int]:
    """Training datums of ``groups`` (group-centred advantages) and the number of trajectories.

    Datums keep the cookbook's ``mask`` input (needed for the KL metrics); strip it with
    :func:`without_mask` before sending them to a trainer.
    """
    advantages = compute_advantages(list(groups))
    datums, _meta = assemble_training_data(list(groups), advantages)
    return datums, sum(len(g.trajectories_G) for g in groups)


def without_mask(datum: tinker.Datum) -> tinker.Datum:
    """The datum without its ``mask`` input (Tinker's losses do not take one)."""
    return tinker.Datum(
        model_input=datum.model_input,
        loss_fn_inputs={k: v for k, v in datum.loss_fn_inputs.items() if k != "mask"},
    )
