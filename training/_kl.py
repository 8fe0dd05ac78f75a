"""The KL penalty to a reference policy: the weights RL started from, saved once, scored every step.

A run with ``kl_penalty_coef > 0`` saves its policy as it stands when RL starts (the loaded
checkpoint or the new adapter, after a warm start if one runs) as the sampler weights
``kl_reference`` and writes their path to ``kl_reference.json`` in the run folder; a resumed run
loads them from there, so the reference does not move across restarts. Every step, before the
optimiser step, the cookbook's :func:`tinker_cookbook.rl.metrics.incorporate_kl_penalty` scores
the step's datums under the reference (``compute_logprobs_async``, one pass a datum) and adds
``coef * (mean_diff - diff)`` to each action token's advantage, with ``diff = logp_sampled -
logp_reference`` and ``mean_diff`` its mean over the batch's action tokens: the standard guard of
RLHF against drifting from the supervised policy where the reward cannot see (its metric
``kl_policy_base`` is that mean, an estimate of KL[policy || reference]).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tinker
from tinker_cookbook.rl.metrics import incorporate_kl_penalty

from training._logging import write_json_atomic

KL_REFERENCE_FILE = "kl_reference.json"
"""The run folder's record of the reference policy's sampler path."""
KL_REFERENCE_NAME = "kl_reference"
"""Name of the reference's saved sampler weights."""
METRIC_KL = "kl_policy_base"
"""The cookbook's metric: mean ``logp_sampled - logp_reference`` over the step's action tokens."""


async def reference_client(training_client: Any, service: Any, log_path: Path) -> Any:
    """The sampling client of the run's KL reference: loaded from ``kl_reference.json`` when the
    run folder has one (a resumed run), else the training client's current weights, saved as
    ``kl_reference`` and recorded there (call it when RL starts)."""
    record = log_path / KL_REFERENCE_FILE
    if record.is_file():
        path = json.loads(record.read_text())["sampler_path"]
    else:
        saved = await training_client.save_weights_for_sampler(KL_REFERENCE_NAME).result_async()
        path = saved.path
        write_json_atomic(record, {"sampler_path": path})  # a crash mid-write must not break the resume
    return await service.create_sampling_client_async(model_path=path)


async def apply_kl_penalty(datums: list[tinker.Datum], reference: Any, coef: float) -> dict[str, float]:
    """Add the KL penalty to ``datums``' advantages in place (the cookbook's, undiscounted); its
    metric. ``coef == 0`` or no datum: nothing is touched and the reference is not asked."""
    if coef == 0 or not datums:
        return {}
    return await incorporate_kl_penalty(datums, reference, coef, 0.0)
