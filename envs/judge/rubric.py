"""Rubrics as data, the judge prompt built from them, and score parsing.

A :class:`Rubric` is a list of weighted :class:`Criterion` s plus a score scale (loaded from JSON,
see ``envs/judge/data/rubrics.json``). :func:`~envs.judge.env.grade` asks a
:class:`~envs.judge.judge.Judge` to grade a transcript against it and returns the normalised score
in ``[0, 1]``:

- :attr:`GradingMode.HOLISTIC`: one call; the judge sees every criterion and answers either one
  overall score (``Score: 7/10``) or a JSON object of per-criterion scores
  (``{"scores": {"correct": 8, "concise": 5}}``, weighted mean).
- :attr:`GradingMode.PER_CRITERION`: one call per criterion, concurrently; weighted mean.

:func:`parse_score` accepts ``Score: 7/10``, ``Score: 7`` (out of the rubric's scale),
``<score>7</score>``, a bare ``7/10`` or ``7`` reply, and JSON objects (``{"score": 7}``). The last
score statement in a reply wins (judges often reason first); out-of-range scores are unparseable.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs.judge.text import format_transcript, json_objects

if TYPE_CHECKING:
    from tinker_cookbook.renderers import Message

_NUM = r"[-+]?\d+(?:\.\d+)?"
_SCORE_RE = re.compile(
    rf"score\s*(?:\*\*)?\s*[:=]?\s*(?:\*\*)?\s*({_NUM})(?:\s*(?:/|out\s+of)\s*({_NUM}))?", re.IGNORECASE
)
_TAG_RE = re.compile(rf"<score>\s*({_NUM})(?:\s*/\s*({_NUM}))?\s*</score>", re.IGNORECASE)
_BARE_RE = re.compile(rf"^\s*({_NUM})(?:\s*/\s*({_NUM}))?\s*\.?\s*$")


class GradingMode(StrEnum):
    """How a rubric is put to the judge."""

    HOLISTIC = "holistic"
    """One call sees every criterion; one overall score or a JSON object of criterion scores."""
    PER_CRITERION = "per_criterion"
    """One call per criterion, run concurrently; the weighted mean of the criterion scores."""


@dataclass(frozen=True)
class Criterion:
    """One rubric criterion."""

    name: str
    """Short identifier (also the key in a JSON reply)."""
    description: str
    """What earns a high score."""
    weight: float = 1.0
    """Relative weight in the overall score (> 0)."""

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise ValueError("a rubric criterion needs a non-empty name")
        if not self.description.strip():
            raise ValueError(f"rubric criterion {self.name!r} needs a non-empty description")
        if not (math.isfinite(self.weight) and self.weight > 0):
            raise ValueError(
                f"rubric criterion {self.name!r} weight must be finite and > 0, got {self.weight}"
            )


@dataclass(frozen=True)
class Rubric:
    """Weighted criteria and a score scale: data, not code (see :meth:`from_dict`)."""

    name: str
    """Identifier (tasks name their rubric)."""
    criteria: tuple[Criterion, ...]
    """What the judge checks."""
    scale: int = 10
    """Scores run from 0 to ``scale``."""
    mode: GradingMode = GradingMode.HOLISTIC
    """One call for all criteria, or one per criterion."""
    instructions: str = ""
    """Extra guidance for the judge (appended to the prompt)."""
    system_prompt: str = field(
        default="You are a strict, fair grader. You read a conversation and grade the assistant's replies."
    )
    """System message of the judge prompt."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a rubric needs a name")
        if not self.criteria:
            raise ValueError(f"rubric {self.name!r} has no criteria")
        names = [c.name for c in self.criteria]
        if len(set(names)) != len(names):
            raise ValueError(f"rubric {self.name!r} has duplicate criterion names: {names}")
        if self.scale < 1:
            raise ValueError(f"rubric {self.name!r} scale must be >= 1, got {self.scale}")

    # --- data ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rubric:
        """Build from ``{"name", "criteria": [{"name", "description", "weight"}], "scale", "mode", "instructions"}``."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a rubric must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - {"name", "criteria", "scale", "mode", "instructions", "system_prompt"}
        if unknown:
            raise ValueError(f"rubric {data.get('name')!r} has unknown key(s): {', '.join(sorted(unknown))}")
        raw = data.get("criteria")
        if not isinstance(raw, list):
            raise ValueError(f"rubric {data.get('name')!r}: 'criteria' must be a list of objects")
        try:
            criteria = tuple(
                Criterion(str(c["name"]), str(c["description"]), float(c.get("weight", 1.0))) for c in raw
            )
            mode = GradingMode(data.get("mode", GradingMode.HOLISTIC))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"rubric {data.get('name')!r} is malformed: {exc}") from None
        extra = {k: data[k] for k in ("instructions", "system_prompt") if k in data}
        return cls(
            name=str(data.get("name", "")),
            criteria=criteria,
            scale=int(data.get("scale", 10)),
            mode=mode,
            **extra,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form read by :meth:`from_dict`."""
        return {
            "name": self.name,
            "criteria": [
                {"name": c.name, "description": c.description, "weight": c.weight} for c in self.criteria
            ],
            "scale": self.scale,
            "mode": str(self.mode),
            "instructions": self.instructions,
            "system_prompt": self.system_prompt,
        }

    def fingerprint(self) -> str:
        """Short hash of the rubric's content (part of cache keys)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    @property
    def total_weight(self) -> float:
        """Sum of the criterion weights."""
        return sum(c.weight for c in self.criteria)

    # --- prompts ---------------------------------------------------------------------------
    def prompt(self, transcript: Sequence[Message], criterion: Criterion | None = None) -> list[Message]:
        """The judge prompt grading ``transcript`` on every criterion (or only ``criterion``)."""
        criteria = (criterion,) if criterion is not None else self.criteria
        lines = [
            f"- {c.name} (weight {c.weight:g}): {c.description}"
            if criterion is None
            else f"- {c.name}: {c.description}"
            for c in criteria
        ]
        if criterion is None and len(criteria) > 1:
            ask = (
                f"Grade the assistant's replies from 0 to {self.scale}, weighing the criteria by their weights. "
                f"End your answer with one line: Score: N/{self.scale}"
            )
        else:
            ask = f"Grade the assistant's replies on this criterion from 0 to {self.scale}. End your answer with one line: Score: N/{self.scale}"
        body = "\n".join(
            [
                "<conversation>",
                format_transcript(transcript),
                "</conversation>",
                "",
                "<rubric>",
                *lines,
                "</rubric>",
                *([self.instructions] if self.instructions else []),
                "",
                ask,
            ]
        )
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": body}]

    # --- parsing ---------------------------------------------------------------------------
    def parse(self, text: str, criterion: Criterion | None = None) -> float | None:
        """Normalised score in ``[0, 1]`` from a judge reply, or None if unparseable.

        A holistic JSON reply may give per-criterion scores (``{"scores": {name: n}}``); their
        weighted mean is used (every criterion must be present).
        """
        if criterion is None and len(self.criteria) > 1:
            for obj in json_objects(text):
                scores = obj.get("scores")
                if isinstance(scores, Mapping):
                    return self._weighted(scores)
        return parse_score(text, self.scale)

    def _weighted(self, scores: Mapping[str, Any]) -> float | None:
        total = 0.0
        for c in self.criteria:
            value = _number(scores.get(c.name), self.scale)
            if value is None:
                return None
            total += c.weight * value
        return total / self.total_weight

    def namespace(self, criterion: Criterion | None = None) -> str:
        """Cache namespace of a grade (rubric content, criterion, parser version)."""
        return f"rubric:v1:{self.fingerprint()}:{criterion.name if criterion else '*'}"


def _fraction(value: str, denominator: str | None, scale: float) -> float | None:
    try:
        num = float(value)
        den = float(denominator) if denominator else float(scale)
    except ValueError:
        return None
    if not (math.isfinite(num) and math.isfinite(den)) or den <= 0 or not 0 <= num <= den:
        return None
    return num / den


def _number(value: Any, scale: float) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _fraction(str(float(value)), None, scale)
    if isinstance(value, str):
        match = _BARE_RE.match(value)
        if match:
            return _fraction(match.group(1), match.group(2), scale)
    return None


def parse_score(text: str, scale: float = 10) -> float | None:
    """Normalised score in ``[0, 1]`` from a judge reply, or None if it states none (or out of range).

    Accepted (the last statement wins): ``{"score": 7}`` / ``{"score": "7/10"}``, ``<score>7</score>``,
    ``Score: 7/10``, ``Score: 7`` (out of ``scale``), ``score = 3 out of 5``, and a reply that is only
    ``7`` or ``7/10``.
    """
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    for obj in reversed(json_objects(text)):
        for key in ("score", "Score", "rating", "grade"):
            if key in obj:
                return _number(obj[key], scale)
    for pattern in (_TAG_RE, _SCORE_RE):
        matches = list(pattern.finditer(text))
        if matches:
            last = matches[-1]
            return _fraction(last.group(1), last.group(2), scale)
    bare = _BARE_RE.match(text)
    if bare:
        return _fraction(bare.group(1), bare.group(2), scale)
    return None


def load_rubrics(path: str | Path) -> dict[str, Rubric]:
    """Rubrics by name from a JSON file holding a list of rubric objects (or one object)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"rubric file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"rubric file {path} is not valid JSON: {exc}") from None
    items = data if isinstance(data, list) else [data]
    rubrics: dict[str, Rubric] = {}
    for item in items:
        rubric = Rubric.from_dict(item)
        if rubric.name in rubrics:
            raise ValueError(f"rubric file {path} defines {rubric.name!r} twice")
        rubrics[rubric.name] = rubric
    return rubrics
