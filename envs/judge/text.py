"""Plain text shared by the rubric and pairwise judges: transcripts and embedded JSON.

Imports no tinker at module level (the cookbook's text helper is imported on first use), so the
rubric and task files can be checked before anything heavy loads (``envs.judge.tasks``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinker_cookbook.renderers import Message

RESPONSE_A_TAG = "response_A"
"""Tag around the first response in a comparison prompt."""
RESPONSE_B_TAG = "response_B"
"""Tag around the second response in a comparison prompt."""
REFERENCE_TAG = "reference"
"""Tag around a task's accepted answers in a comparison prompt (one per line)."""

ROLE_NAMES = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}
"""How :func:`format_transcript` names each role."""


def format_transcript(messages: Sequence[Message]) -> str:
    """A conversation as plain text for a judge (``Role: text`` paragraphs)."""
    from tinker_cookbook.renderers import get_text_content  # tinker + torch: not at import

    return "\n\n".join(
        f"{ROLE_NAMES.get(m['role'], m['role'].title())}: {get_text_content(m).strip()}" for m in messages
    )


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object embedded in ``text``, in order (judges wrap them in prose)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    start = text.find("{")
    while start != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        start = text.find("{", end)
    return found
