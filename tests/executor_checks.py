"""Shared checks of the rollout executors (tests/test_executors.py, tests/test_executors_ray.py).

Every executor is run against the in-process engine on the same parity batch, sampler and seed
(TINY model): the datums must be the very same, with and without workers killed mid-batch.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from backend import LocalServiceClient
from training._executors import ClientSampler, RolloutExecutor, WorkerSampler, saved_sampler
from training._rollouts import SampledBatch, sample_batch, to_datums
from training.testing import TINY_MODEL, KillWorkerOnce, parity_builders

SEED = 7


def tiny_sampler(root: Path) -> tuple[Any, WorkerSampler]:
    """A sampling client on a fresh tiny LoRA saved under ``root``, and how workers reach it."""

    async def make() -> tuple[Any, WorkerSampler]:
        service = LocalServiceClient(root, seed=0)
        trainer = await service.create_lora_training_client_async(TINY_MODEL, rank=4, seed=0)
        return await saved_sampler(trainer, service, 0)

    return anyio.run(make)


@dataclass
class _Sequence:
    tokens: list[int]
    logprobs: list[float]
    stop_reason: str = "length"


@dataclass
class _Response:
    sequences: list[_Sequence]


@dataclass(frozen=True)
class SeedDrawn:
    """A sampling client without a model: a request's tokens are drawn from its seed alone (the
    seed of its place in the batch), so a group rerun at another place gives other datums.
    Workers need no weights for it: the fault tests use it, where what is checked is the
    executor's reruns, not the worker's sampler (the parity tests load the TINY checkpoint)."""

    async def sample_async(self, prompt: Any, num_samples: int, sampling_params: Any) -> _Response:
        rng = random.Random(sampling_params.seed)
        tokens = [rng.randrange(3, 200) for _ in range(sampling_params.max_tokens)]
        return _Response([_Sequence(tokens, [-rng.random() for _ in tokens])])


def seed_drawn() -> tuple[Any, WorkerSampler]:
    """:class:`SeedDrawn` as ``run``'s sampler (the same client in the trainer and workers)."""
    client = SeedDrawn()
    return client, ClientSampler(client)


def run(
    builders: list[Any], sampler: tuple[Any, WorkerSampler], executor: RolloutExecutor | None
) -> SampledBatch:
    client, worker = sampler
    return anyio.run(
        lambda: sample_batch(
            builders,
            client,
            max_tokens=4,
            temperature=1.0,
            sampler_step=0,
            seed=SEED,
            executor=executor,
            worker_sampler=worker,
        )
    )


def datums(batch: SampledBatch) -> list[tuple[list[int], dict[str, list[float]]]]:
    """The batch's datums as plain lists (comparable with ==)."""
    out, _ = to_datums(batch.groups)
    return [
        (d.model_input.to_ints(), {k: v.tolist() for k, v in sorted(d.loss_fn_inputs.items())}) for d in out
    ]


def untimed(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if "time" not in k}


def killing_batch(tmp: Path, n: int = 4, kills: int = 2) -> tuple[list[Any], list[Path]]:
    """``n`` parity groups, the first ``kills`` of which kill their worker once (marker files)."""
    builders: list[Any] = parity_builders(n)
    markers = [tmp / f"killed_{i}" for i in range(kills)]
    for i, marker in enumerate(markers):
        builders[i] = KillWorkerOnce(builders[i], str(marker), os.getpid())
    return builders, markers
