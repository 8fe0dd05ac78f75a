"""Short-answer questions as Inspect AI tasks, for the cookbook's ``run_inspect_evals`` offline.

Two tasks on a local JSONL file (``{"id", "input", "target"}`` per line; default: the shipped
``data/qa.jsonl``, 24 one-word-answer questions):

- :func:`qa`: scored by rule (Inspect's ``includes``: the target appears in the answer);
- :func:`graded_qa`: scored by Inspect's ``model_graded_qa`` with a grader model served by
  whatever ``tinker.ServiceClient`` is at call time: the embedded backend inside
  ``python -m backend.offline`` (offline, e.g. the embedded SmolLM2 grading), a Tinker service
  otherwise (then ``grader`` names a service model or a ``tinker://`` sampler path).

Run offline, unchanged cookbook code::

    python -m backend.offline tinker_cookbook.eval.run_inspect_evals \\
        tasks=envs/evals/inspect_tasks.py@qa model_name=HuggingFaceTB/SmolLM2-135M-Instruct \\
        renderer_name=qwen3_instruct max_tokens=16 temperature=0

The dataset is named after the task, so the cookbook's ``InspectEvaluator`` reports
``qa/accuracy`` (``graded_qa/accuracy``).
"""

from __future__ import annotations

import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig, Model
from inspect_ai.scorer import includes, model_graded_qa
from inspect_ai.solver import generate

__all__ = ["GRADER_INSTRUCTIONS", "QA_FILE", "graded_qa", "grader_model", "load_samples", "qa"]

QA_FILE = Path(__file__).parent / "data" / "qa.jsonl"
"""The shipped questions (``{"id", "input", "target"}`` per line)."""
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
GRADER_INSTRUCTIONS = (
    "Compare the submission with the expert answer. Reply 'GRADE: C' if the submission gives the "
    "expert answer, 'GRADE: I' otherwise."
)
"""What the grader is told (Inspect appends its own grade pattern)."""


def load_samples(path: str | Path = QA_FILE, limit: int | None = None) -> list[Sample]:
    """The questions of a JSONL file as Inspect samples (a missing or malformed file fails here)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"question file not found: {path}")
    samples = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            samples.append(Sample(input=row["input"], target=row["target"], id=row.get("id", str(number))))
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"{path}:{number}: expected an object with 'input' and 'target'") from None
    if not samples:
        raise ValueError(f"{path} holds no questions")
    return samples[:limit]


@task
def qa(path: str = str(QA_FILE), limit: int | None = None) -> Task:
    """The questions of ``path``, one generation each, correct when the answer includes the target."""
    return Task(
        dataset=MemoryDataset(load_samples(path, limit), name="qa"),
        solver=[generate()],
        scorer=includes(),
        name="qa",
    )


def grader_model(grader: str = SMOLLM2, renderer_name: str = "qwen3_instruct", max_tokens: int = 16) -> Model:
    """An Inspect model answering through the current ``tinker.ServiceClient``: ``grader`` is a
    base model name or a sampler path (``local://...`` offline, ``tinker://...`` on a service)."""
    import tinker
    from tinker_cookbook.eval.inspect_utils import InspectAPIFromTinkerSampling

    service = tinker.ServiceClient()
    if "://" in grader:
        base = service.create_rest_client().get_training_run_by_tinker_path(grader).result().base_model
        client = service.create_sampling_client(model_path=grader)
    else:
        base, client = grader, service.create_sampling_client(base_model=grader)
    api = InspectAPIFromTinkerSampling(
        renderer_name=renderer_name,  # pyright: ignore[reportCallIssue]
        model_name=base,
        sampling_client=client,  # pyright: ignore[reportCallIssue]
    )
    return Model(api=api, config=GenerateConfig(temperature=0.0, max_tokens=max_tokens))


@task
def graded_qa(
    path: str = str(QA_FILE),
    limit: int | None = None,
    grader: str = SMOLLM2,
    renderer_name: str = "qwen3_instruct",
) -> Task:
    """The questions of ``path`` graded by ``model_graded_qa`` with the ``grader`` model
    (:func:`grader_model`)."""
    return Task(
        dataset=MemoryDataset(load_samples(path, limit), name="graded_qa"),
        solver=[generate()],
        scorer=model_graded_qa(
            instructions=GRADER_INSTRUCTIONS,
            partial_credit=False,
            model=grader_model(grader, renderer_name),
        ),
        name="graded_qa",
    )
