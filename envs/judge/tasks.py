"""The judge env's data files: :class:`JudgeTask` s from a JSONL task file, and :func:`check_files`.

Standard library only at import (with ``rubric`` and ``text``), so ``python -m envs.judge.train``
checks its task and rubric files in well under a second, before anything heavy (tinker, torch,
the model) is imported or anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs.data_files import read_records
from envs.judge.rubric import load_rubrics

if TYPE_CHECKING:
    from tinker_cookbook.renderers import Message


@dataclass(frozen=True)
class JudgeTask:
    """One prompt of a judge dataset."""

    id: str
    """Identifier (for logs)."""
    messages: tuple[Message, ...]
    """The conversation before the first assistant turn (system and user messages)."""
    rubric: str = "default"
    """Name of the rubric it is graded on (in the rubric file)."""
    persona: str | None = None
    """Persona of the simulated user (multi-turn tasks)."""
    turns: int = 1
    """Assistant turns before the judge grades (> 1 needs a simulated user)."""
    reference: tuple[str, ...] = ()
    """Accepted answers, if the task has any: a pairwise comparison shows them to the judge in a
    ``<reference>`` block (reference-guided judging; the ``rules`` judge checks for them)."""

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError(f"judge task {self.id!r} has no messages")
        if self.turns < 1:
            raise ValueError(f"judge task {self.id!r}: turns must be >= 1, got {self.turns}")
        if any(not isinstance(r, str) or not r.strip() or "\n" in r for r in self.reference):
            raise ValueError(
                f"judge task {self.id!r}: every reference answer must be a non-empty one-line string"
            )
        for m in self.messages:
            if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
                raise ValueError(
                    f"judge task {self.id!r}: every message needs 'role' and 'content', got {m!r}"
                )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, default_id: str = "") -> JudgeTask:
        """From ``{"id", "prompt" | "messages", "system"?, "rubric"?, "persona"?, "turns"?, "reference"?}``
        (``reference``: one accepted answer or a list of them)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a judge task must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - {
            "id",
            "prompt",
            "messages",
            "system",
            "rubric",
            "persona",
            "turns",
            "reference",
        }
        if unknown:
            raise ValueError(
                f"judge task {data.get('id', default_id)!r} has unknown key(s): {', '.join(sorted(unknown))}"
            )
        task_id = str(data.get("id", default_id))
        if ("prompt" in data) == ("messages" in data):
            raise ValueError(f"judge task {task_id!r} needs exactly one of 'prompt' or 'messages'")
        messages: list[Message] = []
        if "system" in data:
            messages.append({"role": "system", "content": str(data["system"])})
        if "prompt" in data:
            messages.append({"role": "user", "content": str(data["prompt"])})
        else:
            raw = data["messages"]
            if not isinstance(raw, list):
                raise ValueError(f"judge task {task_id!r}: 'messages' must be a list")
            messages.extend(raw)
        return cls(
            id=task_id,
            messages=tuple(messages),
            rubric=str(data.get("rubric", "default")),
            persona=None if data.get("persona") is None else str(data["persona"]),
            turns=int(data.get("turns", 1)),
            reference=_reference(task_id, data.get("reference")),
        )


def _reference(task_id: str, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(r, str) for r in items):
        raise ValueError(f"judge task {task_id!r}: 'reference' must be a string or a list of strings")
    return tuple(r.strip() for r in items)


def load_tasks(path: str | Path) -> list[JudgeTask]:
    """Tasks from a JSONL file (one :meth:`JudgeTask.from_dict` object per line; blank lines skipped).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a malformed line (:class:`~envs.data_files.DatasetFormatError`, naming the file
            and line), a malformed task, or no task at all.
    """
    path = Path(path)
    tasks = [
        JudgeTask.from_dict(data, default_id=f"{path.stem}-{number}") for number, data in read_records(path)
    ]
    if not tasks:
        raise ValueError(f"task file {path} holds no tasks")
    return tasks


def check_files(tasks_path: str | Path, rubrics_path: str | Path) -> None:
    """Load the task and rubric files and check every task's rubric exists: a ``ValueError`` (or
    ``FileNotFoundError``) naming the file and line, or the task, on the first problem."""
    rubrics = load_rubrics(rubrics_path)
    for task in load_tasks(tasks_path):
        if task.rubric not in rubrics:
            raise ValueError(
                f"{tasks_path}: task {task.id!r} names rubric {task.rubric!r}; known: {', '.join(sorted(rubrics))}"
            )
