"""Learning rates: our defaults for the embedded models, the cookbook's ``get_lr`` for service models.

The cookbook's ``hyperparam_utils.get_lr(model)`` fits LoRA rates of the Llama and Qwen families on
a service and raises for other models, the embedded SmolLM2 among them. :func:`learning_rate`
answers for both: for an embedded model (``backend.model.KNOWN_MODELS``) the rate our CLIs ship for that
kind of training (:data:`LOCAL_LEARNING_RATES`; measure your own with ``python -m training.sweep``),
for any other model the cookbook's ``get_lr`` (DPO: the cookbook DPO recipe's ``1e-5``).

How a local rate carries over: the embedded backend's LoRA uses ``lora_alpha = 2 x rank`` (a scale
of 2 on ``B @ A``), a service's LoRA ``alpha = 32`` at any rank (a scale of ``32 / rank``). With
Adam the update of ``B @ A`` grows with that scale, so the same rate moves a rank-16 adapter about
as far on both (scale 2 each); at rank 32 a service's scale is 1, so double the rate to match,
and in general multiply by ``2 * rank / 32``. Across models the rate also depends on the width
(the cookbook's ``get_lr`` formula): sweep again on the service model, starting from ``get_lr``.

DPO is the exception the docs spell out: their ``1e-5`` .. ``1e-6`` (the cookbook DPO recipe's
``1e-5``) are LoRA rates on a service for runs of hundreds of steps over thousands of pairs, some
30-500 times below ``get_lr``'s SL rate for the same model: DPO's loss keeps pushing the
chosen-minus-rejected log-ratio, and a small rate keeps the policy near its reference over that
long a run. A short local run on the shipped comparisons (a few steps over a few dozen pairs) moves
little at those rates, so our ``dpo`` default is higher; set it from a sweep on the embedded model
(``python -m training.sweep envs.judge.preference dataset=... dpo_learning_rate=...``; what is
measured so far: ``docs/measurements.md``). It is not a service rate: on a service start in the
docs' range and sweep.
"""

from __future__ import annotations

__all__ = ["LOCAL_LEARNING_RATES", "learning_rate", "service_equivalent"]

LOCAL_LEARNING_RATES: dict[str, float] = {
    "sl": 3e-4,  # envs.judge.preference / rlhf SL step
    "rl": 1e-3,  # training.Config
    "dpo": 2e-4,  # envs.judge.preference
    "rm": 1e-3,  # envs.judge.rlhf reward model
    "distill": 5e-4,  # envs.distill student
}
"""Default LoRA learning rates of our CLIs for the embedded models, by kind of training."""
SERVICE_DPO_RATE = 1e-5
"""The cookbook DPO recipe's default rate (``recipes/preference/dpo/train.py``)."""


def learning_rate(model_name: str, kind: str = "sl") -> float:
    """A LoRA learning rate for ``model_name`` and ``kind`` (``sl``, ``rl``, ``dpo``, ``rm``, ``distill``)."""
    from backend.model import KNOWN_MODELS

    if kind not in LOCAL_LEARNING_RATES:
        raise ValueError(f"kind must be one of {', '.join(LOCAL_LEARNING_RATES)}; got {kind!r}")
    if model_name in KNOWN_MODELS:
        return LOCAL_LEARNING_RATES[kind]
    if kind == "dpo":
        return SERVICE_DPO_RATE
    from tinker_cookbook.hyperparam_utils import get_lr

    return get_lr(model_name)


def service_equivalent(local_rate: float, rank: int, service_alpha: int = 32) -> float:
    """The service rate that scales a rank-``rank`` LoRA update like ``local_rate`` does locally
    (local scale ``2``, service scale ``service_alpha / rank``)."""
    if rank < 1 or service_alpha < 1:
        raise ValueError(f"rank and service_alpha must be >= 1, got {rank}, {service_alpha}")
    return local_rate * 2 * rank / service_alpha
