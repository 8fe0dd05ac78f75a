"""Validation of the math data keys, cheap to import (no tinker, no sympy)."""

from __future__ import annotations

SOURCES = ("generated", "gsm8k", "math", "jsonl")
"""Values of ``source`` (``envs.math.data.SOURCES``)."""
LEVELS = ("1", "2", "3", "4", "5")
"""Generator levels."""


def check_data_keys(source: str, levels: str) -> None:
    """Raise a one-line ``ValueError`` for a bad source or level list."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {list(SOURCES)}, got {source!r}")
    parts = [x.strip() for x in levels.split(",")]
    if not all(x in LEVELS for x in parts):
        raise ValueError(f"levels must be a comma-separated subset of 1,2,3,4,5, got {levels!r}")
