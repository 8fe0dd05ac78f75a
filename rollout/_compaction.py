"""The compaction contract: how the engine asks an env to compact its history every N turns.

Periodic compaction (``renderers_ext.CompactingRenderer``: thinking kept for N assistant turns,
then stripped from all earlier turns once) changes how an env builds its observations, and only
the env builds them. So, like the cookbook's ``SupportsToolCallLimit`` / ``set_max_tool_calls``
seam, the engine *pushes* the request into the env once, at rollout start, through one method:

- :class:`SupportsCompaction`: an env opts in by defining ``set_compaction_period(period)``.
  ``envs.ChatEnv`` does (it wraps its renderer in ``CompactingRenderer``); a cookbook env that
  re-renders its conversation with ``self.renderer`` each turn opts in with three lines::

      def set_compaction_period(self, period: int) -> None:
          from renderers_ext import CompactingRenderer
          self.renderer = CompactingRenderer(self.renderer, period)

- An env without the method cannot honour the request, and the run says so, never silently
  nothing: with ``EngineConfig.compaction_required`` (the default) the rollout fails with
  :class:`CompactionUnsupported` before its first sample; otherwise it runs uncompacted, one
  warning per env type is logged, and the trajectory carries :data:`METRIC_COMPACTION_UNSUPPORTED`
  (summed by :func:`rollout.summarize` as ``traj/compaction_unsupported``).

An env that keeps its renderer in ``env.renderer`` (and its conversation in ``env.messages``)
lets the run-time extension check recognise the compaction breaks as expected; each one is
marked on its transition with :data:`METRIC_COMPACTION` and a ``compaction`` log line, which
transcripts show.
"""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from rollout._results import RolloutFailure

logger = logging.getLogger(__name__)

METRIC_COMPACTION = "rollout/compaction"
"""1.0 on a transition whose next observation was compacted (earlier thinking stripped)."""
METRIC_COMPACTION_UNSUPPORTED = "rollout/compaction_unsupported"
"""1.0 on the last transition of a trajectory whose env could not honour a requested compaction
(only with ``EngineConfig.compaction_required=False``; otherwise the rollout fails)."""
LOG_COMPACTION = "compaction"
"""Transition log key describing a compaction (which turn, how many tokens it dropped)."""


@runtime_checkable
class SupportsCompaction(Protocol):
    """Seam through which the engine asks an env to compact its history every ``period`` turns.

    Called once per rollout, before ``initial_observation``, when
    ``EngineConfig.compaction_period`` is set. The env must then build every observation as
    ``CompactingRenderer(its renderer, period)`` would render the conversation (a second call
    with the same period is a no-op).
    """

    def set_compaction_period(self, period: int) -> None:
        """Compact the history every ``period`` assistant turns from now on."""
        ...


class CompactionUnsupported(RolloutFailure):
    """Compaction was requested (``compaction_period``) for an env that cannot honour it."""


_warned: set[str] = set()


def apply_compaction(env: object, period: int, *, required: bool = True) -> bool:
    """Push a compaction period into ``env`` through :class:`SupportsCompaction`.

    Returns True when the env took it. An env without ``set_compaction_period`` raises
    :class:`CompactionUnsupported` when ``required``; otherwise a warning is logged (once per
    env type) and False is returned.
    """
    setter = getattr(env, "set_compaction_period", None)
    if setter is not None:
        setter(period)
        return True
    name = type(env).__name__
    message = (
        f"compaction_period={period} was requested but {name} cannot compact (no set_compaction_period "
        "method; see rollout.SupportsCompaction)"
    )
    if required:
        raise CompactionUnsupported(message)
    if name not in _warned:
        _warned.add(name)
        logger.warning("%s; its episodes run uncompacted (counted in %s)", message, METRIC_COMPACTION_UNSUPPORTED)
    return False
