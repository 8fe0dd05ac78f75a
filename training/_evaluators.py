"""The cookbook's evaluators inside our loop: ``SamplingClientEvaluator`` and ``TrainingClientEvaluator``.

:func:`build_evaluators` calls each builder once at the start of a run and checks what it made
(a wrong type fails before any training); :func:`run_evaluators` runs them one after another, a
sampling evaluator on the current sampler and a training evaluator on the training client, and
merges their metrics under the names they return (as the cookbook's trainers do).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tinker_cookbook.eval.evaluators import Evaluator, SamplingClientEvaluator, TrainingClientEvaluator


def build_evaluators(builders: Sequence[Callable[[], Any]], key: str) -> list[Evaluator]:
    """``[b() for b in builders]``, each checked to be one of the cookbook's evaluator types."""
    out: list[Evaluator] = []
    for i, builder in enumerate(builders):
        if not callable(builder):
            raise TypeError(
                f"{key}[{i}] is a {type(builder).__name__}, not an evaluator builder (a callable)"
            )
        evaluator = builder()
        if not isinstance(evaluator, SamplingClientEvaluator | TrainingClientEvaluator):
            raise TypeError(
                f"{key}[{i}] built a {type(evaluator).__name__}; expected a tinker_cookbook "
                "SamplingClientEvaluator or TrainingClientEvaluator"
            )
        out.append(evaluator)
    return out


async def run_evaluators(
    evaluators: Sequence[Evaluator], training_client: Any, sampling_client: Any
) -> dict[str, float]:
    """Run ``evaluators`` and merge their metrics (a later evaluator's name wins on a clash)."""
    metrics: dict[str, float] = {}
    for evaluator in evaluators:
        if isinstance(evaluator, TrainingClientEvaluator):
            metrics.update(await evaluator(training_client))
        else:
            metrics.update(await evaluator(sampling_client))
    return metrics
