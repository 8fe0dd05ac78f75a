"""Where a policy call sits in a batch: :class:`SampleCall` and :func:`current_sample_call`.

The engine sets it (a context variable) around every policy call it makes, so a completer or a
sampling client deep below can key work on the call's *place* rather than on its arrival order,
which depends on timing. The training loop uses it to give every sampling request a seed derived
from (run seed, step, group, slot, attempt, turn): two runs with one seed then sample the same
tokens for the same env even where several envs of a group send the same prompt (arrival order
among identical prompts decides nothing).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SampleCall:
    """The place of one policy call: which group, which env of it, which attempt, which turn."""

    group: int
    """Index of the group in its batch (the builder's position given to ``run_batch``/``stream``)."""
    slot: int
    """Index of the env in its group (the position ``make_envs`` returned it at)."""
    attempt: int
    """0 for the slot's first env; +1 for each retry on a fresh env."""
    turn: int
    """0-based turn of the episode the call samples."""


class _Place:
    """The engine's mutable record of an attempt's place: the loop bumps ``turn`` in place (an
    attribute store per turn; a new frozen object and a context-variable set per turn cost the
    engine's overhead bench ~10%)."""

    __slots__ = ("attempt", "group", "slot", "turn")

    def __init__(self, group: int, slot: int, attempt: int) -> None:
        self.group = group
        self.slot = slot
        self.attempt = attempt
        self.turn = 0


_CURRENT: ContextVar[_Place | None] = ContextVar("turngym_sample_call", default=None)


def current_sample_call() -> SampleCall | None:
    """The :class:`SampleCall` the engine is making now in this task; None outside the engine
    (or for a bare :func:`rollout.run_episode` call, which has no group)."""
    place = _CURRENT.get()
    if place is None:
        return None
    return SampleCall(group=place.group, slot=place.slot, attempt=place.attempt, turn=place.turn)
