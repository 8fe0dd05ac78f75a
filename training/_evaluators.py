"""The cookbook's evaluators inside our loop: ``SamplingClientEvaluator`` and ``TrainingClientEvaluator``.

:func:`build_evaluators` calls each builder once at the start of a run and checks what it made
(a wrong type fails before any training); :func:`run_evaluators` runs them one after another, a
sampling evaluator on the current sampler and a training evaluator on the training client, and
merges their metrics under the names they return (as the cookbook's trainers do).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from tinker_cookbook.eval.evaluators import Evaluator, SamplingClientEvaluator, TrainingClientEvaluator

from training._config import ConfigError


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


def named_builders(spec: str, *, model_name: str, renderer_name: str | None) -> list[Callable[[], Any]]:
    """The evaluator builders a comma-separated ``module:attr`` spec names (the command line's
    ``evaluator=...``, as the cookbook's Python configs pass ``evaluator_builders``). A builder whose
    signature takes ``model_name`` / ``renderer_name`` gets the run's; :class:`ConfigError` (one line) for
    a name that does not resolve to a callable."""
    builders: list[Callable[[], Any]] = []
    for name in (part.strip() for part in spec.split(",")):
        if not name:
            continue
        module_name, sep, attr = name.partition(":")
        if not sep or not module_name or not attr:
            raise ConfigError(
                f"evaluator {name!r}: expected module:attr, e.g. envs.evals.builders:qa_inspect"
            )
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"evaluator {name!r} does not resolve: {exc}") from None
        if not callable(obj):
            raise ConfigError(f"evaluator {name!r} is a {type(obj).__name__}, not an evaluator builder")
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        given = {
            k: v for k, v in (("model_name", model_name), ("renderer_name", renderer_name)) if k in params
        }
        builders.append(functools.partial(obj, **given) if given else obj)
    return builders


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
