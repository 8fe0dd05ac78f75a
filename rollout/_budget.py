"""Budget arithmetic of one rollout, over the cookbook's ``RolloutLimits`` (same semantics as the
cookbook's ``rollout_runner``).

Kept as plain functions over a :class:`~tinker_cookbook.rl.rollout_limits.RolloutLimits` so the
engine's hot loop calls them only when the corresponding limit is set.
"""

from __future__ import annotations

from typing import Any

import chz
from tinker_cookbook.rl.rollout_limits import RolloutLimits
from tinker_cookbook.rl.types import StopReason

_FIELDS = (
    "max_turns",
    "max_trajectory_tokens",
    "max_sampled_tokens",
    "max_turn_tokens",
    "max_tool_calls",
    "rollout_timeout_seconds",
    "sampling_turn_timeout_seconds",
)


def effective_limits(limits: RolloutLimits, env: Any) -> RolloutLimits:
    """``limits``, with unset fields taken from the env's cookbook ``rollout_limits`` if it has one.

    Cookbook envs built from a ``rollout_presets.RolloutConfig`` advertise their budgets as
    ``env.rollout_limits``; honouring it keeps them behaving as under the cookbook's own runner
    (which uses them when it is given no limits; here they fill the fields left unset).
    """
    theirs = getattr(env, "rollout_limits", None)
    if theirs is None:
        return limits
    updates: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(theirs, name, None)
        if value is not None and getattr(limits, name) is None:
            updates[name] = value
    return chz.replace(limits, **updates) if updates else limits


def cumulative_stop(limits: RolloutLimits, ob_len: int, sampled: int) -> StopReason | None:
    """Stop before sampling when a cumulative budget has ``<= 1`` token left (trajectory first)."""
    if limits.max_trajectory_tokens is not None and limits.max_trajectory_tokens - ob_len <= 1:
        return StopReason.MAX_TOKENS
    if limits.max_sampled_tokens is not None and limits.max_sampled_tokens - sampled <= 1:
        return StopReason.MAX_SAMPLED_TOKENS
    return None


def per_call_max_tokens(limits: RolloutLimits, ob_len: int, sampled: int) -> int | None:
    """``max_tokens`` for the next sampling call: min over the set budget terms (None if none)."""
    terms: list[int] = []
    if limits.max_turn_tokens is not None:
        terms.append(limits.max_turn_tokens)
    if limits.max_trajectory_tokens is not None:
        terms.append(limits.max_trajectory_tokens - ob_len)
    if limits.max_sampled_tokens is not None:
        terms.append(limits.max_sampled_tokens - sampled)
    return min(terms) if terms else None


def has_token_budget(limits: RolloutLimits) -> bool:
    """Whether any token budget is set (the hot loop skips the arithmetic otherwise)."""
    return (
        limits.max_turn_tokens is not None
        or limits.max_trajectory_tokens is not None
        or limits.max_sampled_tokens is not None
    )
