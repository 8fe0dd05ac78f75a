"""GSM8K-style math as an Inspect AI task, scored by TurnGym's math grader (needs ``inspect-ai``).

Install the optional extra (``pip install -e ".[inspect]"``; ``scripts/setup.sh`` does it). The
task reads a local GSM8K-style file (``question``, ``answer`` ending in ``#### <n>``; see
:func:`envs.math.load_gsm8k`), asks for a ``\\boxed{}`` answer and scores each completion with
:class:`envs.math.Grader` (symbolic equivalence in killable worker processes), or with Inspect's
own ``match(numeric=True)``. Its dataset is named ``gsm8k``, so the cookbook's
``InspectEvaluator`` reports ``gsm8k/accuracy``.

Run it on the embedded model with ``python -m envs.math.eval harness=inspect`` (offline), or hand
``gsm8k(path=...)`` to the cookbook's ``InspectEvaluatorBuilder`` in ``evaluator_builders``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, match, scorer, stderr
from inspect_ai.solver import TaskState, generate

from envs.math.data import MathProblem, load_gsm8k
from envs.math.grading import default_grader, last_boxed

__all__ = ["DATASET_NAME", "INSTRUCTION", "gsm8k", "math_grader", "write_gsm8k_jsonl"]

DATASET_NAME = "gsm8k"
"""Name of the task's dataset (the prefix of the cookbook evaluator's metrics)."""
INSTRUCTION = " Write your final answer in \\boxed{}."
"""Appended to every question."""


@scorer(metrics=[accuracy(), stderr()])
def math_grader() -> Scorer:
    """Correct when the completion's last ``\\boxed{}`` answer equals the target (TurnGym's grader)."""

    async def score(state: TaskState, target: Target) -> Score:
        completion = state.output.completion
        result = await default_grader().grade_boxed(completion, target.text)
        return Score(
            value=CORRECT if result.correct else INCORRECT,
            answer=last_boxed(completion) or "",
            explanation=str(result.status),
        )

    return score


@task
def gsm8k(
    path: str, limit: int | None = None, scorer: str = "grader", instruction: str = INSTRUCTION
) -> Task:
    """The GSM8K-style problems of the local file ``path`` (at most ``limit``), one generation
    each; ``scorer``: ``grader`` (TurnGym's math grader on the ``\\boxed{}`` answer) or ``match``
    (Inspect's numeric match on the last number)."""
    if scorer not in ("grader", "match"):
        raise ValueError(f"scorer must be 'grader' or 'match', got {scorer!r}")
    problems = load_gsm8k(path, limit=limit)  # a missing or malformed file fails here, clearly
    samples = [
        Sample(input=p.question + instruction, target=p.answer, id=p.uid or str(i))
        for i, p in enumerate(problems)
    ]
    return Task(
        dataset=MemoryDataset(samples, name=DATASET_NAME),
        solver=[generate()],
        scorer=math_grader() if scorer == "grader" else match(numeric=True),
        name=DATASET_NAME,
    )


def write_gsm8k_jsonl(problems: Sequence[MathProblem], path: str | os.PathLike[str]) -> Path:
    """Write ``problems`` as a GSM8K-style JSONL file (``#### <answer>`` lines) for :func:`gsm8k`."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "".join(json.dumps({"question": p.question, "answer": f"#### {p.answer}"}) + "\n" for p in problems)
    )
    return out
