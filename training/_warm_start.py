"""Supervised warm starts: a few ``cross_entropy`` steps on fixed transcripts before RL.

:func:`sft_datum` turns a token sequence with per-token weights (1 on the assistant's tokens)
into a next-token datum; :func:`supervised_warm_start` makes a :data:`training.WarmStart` hook
that trains on such datums through the run's own training client (so the result is in the
first checkpoint, and a resumed run does not redo it).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from typing import Any

import tinker
import torch

from training._config import Config

logger = logging.getLogger(__name__)


def sft_datum(tokens: Sequence[int], weights: Sequence[float]) -> tinker.Datum:
    """A next-token datum: inputs ``tokens[:-1]``, targets ``tokens[1:]``, weights ``weights[1:]``."""
    if len(tokens) != len(weights) or len(tokens) < 2:
        raise ValueError(f"need >= 2 tokens and one weight per token, got {len(tokens)} and {len(weights)}")
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints(list(tokens[:-1])),
        loss_fn_inputs={
            "target_tokens": tinker.TensorData.from_torch(torch.tensor(list(tokens[1:]), dtype=torch.int64)),
            "weights": tinker.TensorData.from_torch(torch.tensor(list(weights[1:]), dtype=torch.float32)),
        },
    )


def supervised_warm_start(
    datums: Sequence[tinker.Datum],
    *,
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int = 0,
) -> Any:
    """A :data:`training.WarmStart` hook: ``steps`` AdamW steps of ``cross_entropy`` on
    ``batch_size`` datums each (reshuffled every pass). Returns metrics (first/last loss per
    weighted token, seconds)."""
    pool = list(datums)
    if not pool:
        raise ValueError("a supervised warm start needs at least one datum")

    async def warm_start(training_client: Any, config: Config) -> dict[str, float]:
        rng = random.Random(seed)
        order: list[tinker.Datum] = []
        losses: list[float] = []
        t0 = time.monotonic()
        adam = tinker.AdamParams(
            learning_rate=learning_rate,
            beta1=config.beta1,
            beta2=config.beta2,
            eps=config.eps,
            weight_decay=config.weight_decay,
            grad_clip_norm=config.grad_clip_norm,
        )
        for step in range(steps):
            batch: list[tinker.Datum] = []
            while len(batch) < min(batch_size, len(pool)):
                if not order:
                    order = pool[:]
                    rng.shuffle(order)
                batch.append(order.pop())
            fb_future = await training_client.forward_backward_async(batch, loss_fn="cross_entropy")
            optim_future = await training_client.optim_step_async(adam)
            fb = await fb_future.result_async()
            await optim_future.result_async()
            n = sum(float(d.loss_fn_inputs["weights"].to_torch().sum()) for d in batch)
            loss = float((fb.metrics or {}).get("loss:sum", 0.0)) / max(n, 1.0)
            losses.append(loss)
            logger.info("warm start step %d/%d: loss per token %.4f", step + 1, steps, loss)
            print(f"[warm start] step {step + 1}/{steps}: loss/token {loss:.4f}", flush=True)
        return {
            "warm_start/steps": float(steps),
            "warm_start/loss_first": losses[0] if losses else 0.0,
            "warm_start/loss_last": losses[-1] if losses else 0.0,
            "warm_start/seconds": time.monotonic() - t0,
        }

    return warm_start
