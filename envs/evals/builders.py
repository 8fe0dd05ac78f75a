"""Evaluator builders by name, for the train CLIs' ``evaluator=module:attr`` key.

``evaluator=envs.evals.builders:qa_inspect`` runs the cookbook's ``InspectEvaluator`` on the
shipped questions (:func:`envs.evals.inspect_tasks.qa`) at every evaluation of the run, on its
current sampler; the metric is ``qa/accuracy``.
"""

from __future__ import annotations

from tinker_cookbook.eval.evaluators import SamplingClientEvaluator

__all__ = ["qa_inspect"]


def qa_inspect(model_name: str, renderer_name: str | None = None, limit: int = 8) -> SamplingClientEvaluator:
    """The cookbook's ``InspectEvaluator`` on the first ``limit`` shipped questions (greedy, 16 tokens)."""
    from tinker_cookbook.eval.inspect_evaluators import InspectEvaluatorBuilder

    from envs.evals.inspect_tasks import qa
    from renderers_ext import recommended_renderer_name

    return InspectEvaluatorBuilder(
        tasks=[qa(limit=limit)],
        model_name=model_name,
        renderer_name=renderer_name or recommended_renderer_name(model_name),
        max_tokens=16,
        temperature=0.0,
        log_level="warning",
    )()
