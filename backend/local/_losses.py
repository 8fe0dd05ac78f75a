"""Built-in losses, with the definitions of Tinker's documentation (token level, summed, not averaged).

With ``lp`` the training model's logprobs of ``target_tokens`` and, for RL, ``q`` the sampler's
logprobs (``loss_fn_inputs["logprobs"]``) and ``A`` the advantages:

- ``cross_entropy``: ``-(weights * lp).sum()`` (``weights`` defaults to ones);
- ``importance_sampling``: ``-(exp(lp - q) * A).sum()``;
- ``ppo``: ``-min(r * A, clip(r, low, high) * A).sum()`` with ``r = exp(lp - q)``; ``low``/``high``
  from ``loss_fn_config["clip_low_threshold"|"clip_high_threshold"]`` (defaults 0.8 / 1.2, i.e.
  Tinker's epsilon of 0.2).

Extension: an optional ``mask`` input multiplies the per-token loss of every loss (the cookbook
strips it before sending to Tinker, so it is ignored there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ._errors import UnknownLossError

LossInputs = Mapping[str, torch.Tensor]
LossConfig = Mapping[str, float | str]
LossFn = Callable[[torch.Tensor, LossInputs, LossConfig], torch.Tensor]
"""(target logprobs [N], loss_fn_inputs as tensors, loss_fn_config) -> per-token loss [N]."""


def cross_entropy(lp: torch.Tensor, inputs: LossInputs, config: LossConfig) -> torch.Tensor:
    """Per-token negative log-likelihood weighted by ``weights``."""
    weights = inputs.get("weights")
    return -lp if weights is None else -lp * weights


def _ratio(lp: torch.Tensor, inputs: LossInputs) -> torch.Tensor:
    return torch.exp(lp - inputs["logprobs"])


def importance_sampling(lp: torch.Tensor, inputs: LossInputs, config: LossConfig) -> torch.Tensor:
    """Per-token importance-weighted policy gradient loss ``-exp(lp - q) * A``."""
    return -_ratio(lp, inputs) * inputs["advantages"]


def ppo(lp: torch.Tensor, inputs: LossInputs, config: LossConfig) -> torch.Tensor:
    """Per-token PPO clipped-surrogate loss."""
    low = float(config.get("clip_low_threshold", 0.8))
    high = float(config.get("clip_high_threshold", 1.2))
    ratio = _ratio(lp, inputs)
    adv = inputs["advantages"]
    return -torch.minimum(ratio * adv, torch.clamp(ratio, low, high) * adv)


LOSSES: dict[str, tuple[LossFn, tuple[str, ...], tuple[str, ...]]] = {
    # name: (fn, required inputs, optional inputs)
    "cross_entropy": (cross_entropy, ("target_tokens",), ("weights", "mask")),
    "importance_sampling": (importance_sampling, ("target_tokens", "logprobs", "advantages"), ("mask",)),
    "ppo": (ppo, ("target_tokens", "logprobs", "advantages"), ("mask",)),
}


def get_loss(name: str) -> tuple[LossFn, tuple[str, ...], tuple[str, ...]]:
    """The loss called ``name`` with its required and optional ``loss_fn_inputs`` keys."""
    try:
        return LOSSES[name]
    except KeyError:
        raise UnknownLossError(
            f"unknown loss_fn {name!r}; the local backend implements: {', '.join(LOSSES)}"
        ) from None
