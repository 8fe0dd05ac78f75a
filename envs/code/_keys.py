"""Validation of the game's command-line keys, cheap to import (no tinker, no sympy)."""

from __future__ import annotations

from envs.math._keys import check_game_keys

TOOL_FORMATS = ("auto", "tool", "tag")
"""Values of ``tool_format`` (``envs.code.env.ToolFormat``)."""
ISOLATIONS = ("auto", "namespaces", "landlock", "rlimits")
"""Values of ``isolation`` (``envs.code.sandbox.Isolation``)."""


def check_code_keys(tool_format: str, isolation: str, source: str, levels: str) -> None:
    """Raise a one-line ``ValueError`` for a bad tool format, isolation, source or level list."""
    if tool_format not in TOOL_FORMATS:
        raise ValueError(f"tool_format must be one of {list(TOOL_FORMATS)}, got {tool_format!r}")
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {list(ISOLATIONS)}, got {isolation!r}")
    check_game_keys("single", None, source, levels)
