"""Where a policy call sits in a batch: :class:`SampleCall`, handed to the policy by the engine.

With ``EngineConfig.seed`` set, the engine calls its policy as ``policy(ob, stop, call=...)``
(``max_tokens=`` too when a token budget applies): the call's place (group, slot, attempt,
turn) and the engine's seed, so the policy can seed the sampling request by its place rather
than by its arrival order, which depends on timing. Two runs with one seed then sample the same
tokens for the same env, even where several envs of a group send the same prompt.
``training.SeededTokenCompleter`` is such a policy (its seed: ``training.call_seed``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class SampleCall:
    """One policy call of a seeded engine: the engine's seed and the call's place."""

    seed: int
    """``EngineConfig.seed`` of the engine making the call."""
    group: int
    """Index of the group in its batch (the builder's position given to ``run_batch``/``stream``)."""
    slot: int
    """Index of the env in its group (the position ``make_envs`` returned it at)."""
    attempt: int
    """0 for the slot's first env; +1 for each retry on a fresh env."""
    turn: int
    """0-based turn of the episode the call samples."""


def takes_call(policy: Any) -> bool:
    """Whether ``policy`` accepts the ``call`` keyword a seeded engine passes (True when its
    signature cannot be read: the call itself will tell)."""
    try:
        params = inspect.signature(policy).parameters
    except (TypeError, ValueError):
        return True
    return "call" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def check_takes_call(policy: Any) -> None:
    """One-line ``TypeError`` when a seeded engine's ``policy`` cannot take its ``call``."""
    if not takes_call(policy):
        raise TypeError(
            f"EngineConfig.seed is set but the policy ({type(policy).__name__}) takes no `call` keyword "
            "(a rollout.SampleCall): use training.SeededTokenCompleter, or leave the seed unset"
        )
