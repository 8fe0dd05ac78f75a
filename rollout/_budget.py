"""Budget arithmetic of one rollout (same semantics as the cookbook's ``rollout_runner``).

Kept as plain functions over a :class:`~rollout._config.Budget` so the engine's hot loop calls
them only when the corresponding budget is set.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tinker_cookbook.rl.types import StopReason

from rollout._config import Budget

_COOKBOOK_FIELDS = {
    "max_turns": "max_turns",
    "max_trajectory_tokens": "max_trajectory_tokens",
    "max_sampled_tokens": "max_sampled_tokens",
    "max_turn_tokens": "max_turn_tokens",
    "rollout_timeout_seconds": "rollout_timeout_s",
    "sampling_turn_timeout_seconds": "sample_timeout_s",
}


def effective_budget(budget: Budget, env: Any) -> Budget:
    """``budget``, with unset fields taken from the env's cookbook ``rollout_limits`` if it has one.

    Cookbook envs built from a ``RolloutConfig`` advertise their budgets as
    ``env.rollout_limits`` (a ``RolloutLimits``); honouring it keeps them behaving as under the
    cookbook's own runner.
    """
    limits = getattr(env, "rollout_limits", None)
    if limits is None:
        return budget
    updates: dict[str, Any] = {}
    for theirs, ours in _COOKBOOK_FIELDS.items():
        value = getattr(limits, theirs, None)
        if value is not None and getattr(budget, ours) is None:
            updates[ours] = value
    return replace(budget, **updates) if updates else budget


def cumulative_stop(budget: Budget, ob_len: int, sampled: int) -> StopReason | None:
    """Stop before sampling when a cumulative budget has ``<= 1`` token left (trajectory first)."""
    if budget.max_trajectory_tokens is not None and budget.max_trajectory_tokens - ob_len <= 1:
        return StopReason.MAX_TOKENS
    if budget.max_sampled_tokens is not None and budget.max_sampled_tokens - sampled <= 1:
        return StopReason.MAX_SAMPLED_TOKENS
    return None


def per_call_max_tokens(budget: Budget, ob_len: int, sampled: int) -> int | None:
    """``max_tokens`` for the next sampling call: min over the set budget terms (None if none)."""
    terms: list[int] = []
    if budget.max_turn_tokens is not None:
        terms.append(budget.max_turn_tokens)
    if budget.max_trajectory_tokens is not None:
        terms.append(budget.max_trajectory_tokens - ob_len)
    if budget.max_sampled_tokens is not None:
        terms.append(budget.max_sampled_tokens - sampled)
    return min(terms) if terms else None


def has_token_budget(budget: Budget) -> bool:
    """Whether any token budget is set (the hot loop skips the arithmetic otherwise)."""
    return (
        budget.max_turn_tokens is not None
        or budget.max_trajectory_tokens is not None
        or budget.max_sampled_tokens is not None
    )
