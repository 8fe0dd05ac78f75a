"""Validation of the game's command-line keys, cheap to import (no tinker, no sympy)."""

from __future__ import annotations

PRESETS = ("single", "feedback", "calculator")
"""Values of ``env`` (``envs.math.env.EnvPreset``)."""
CALCULATOR_MODES = ("off", "auto", "tool", "tag")
"""Values of ``calculator`` (``envs.math.env.CalculatorMode``)."""
SOURCES = ("generated", "gsm8k", "math", "jsonl")
"""Values of ``source``."""
LEVELS = ("1", "2", "3", "4", "5")
"""Generator levels."""


def check_game_keys(env: str, calculator: str | None, source: str, levels: str) -> None:
    """Raise a one-line ``ValueError`` for a bad preset, calculator mode, source or level list."""
    if env not in PRESETS:
        raise ValueError(f"env must be one of {list(PRESETS)}, got {env!r}")
    if calculator is not None and calculator not in CALCULATOR_MODES:
        raise ValueError(f"calculator must be one of {list(CALCULATOR_MODES)}, got {calculator!r}")
    if source not in SOURCES:
        raise ValueError(f"source must be one of {list(SOURCES)}, got {source!r}")
    parts = [x.strip() for x in levels.split(",")]
    if not all(x in LEVELS for x in parts):
        raise ValueError(f"levels must be a comma-separated subset of 1,2,3,4,5, got {levels!r}")
