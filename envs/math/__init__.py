"""Math environments: single-turn, multi-turn with feedback, calculator tool; grading that never blocks.

- Env: :class:`MathEnv` configured by :class:`MathEnvConfig` (presets :class:`EnvPreset`:
  ``single``, ``feedback``, ``calculator``; :class:`CalculatorMode`).
- Grading: :class:`Grader` (worker processes, hard timeout, in-process fast path),
  :class:`GraderConfig`, :class:`GradeResult`, :class:`GradeStatus`, :class:`GraderStats`,
  :func:`default_grader`, :func:`normalize_answer`, :func:`extract_boxed`.
- Calculator: :func:`evaluate` (safe ``ast`` arithmetic), :class:`CalculatorLimits`,
  :class:`CalculatorError`.
- Data: :class:`MathProblem`, :func:`generate_problems` (seeded, offline), :func:`load_gsm8k`,
  :func:`load_math`, :func:`load_jsonl`, :class:`DatasetFormatError`, :class:`Split`.
- Builders: :class:`MathGroupBuilder`, :class:`MathRLDataset`, :class:`MathDatasetBuilder` (chz).
- Entry points: ``python -m envs.math.train`` and ``python -m envs.math.eval``.
"""

from typing import TYPE_CHECKING

from envs._lazy import attach

if TYPE_CHECKING:  # the public names; imported lazily at run time (envs._lazy)
    from envs.math.builders import MathDatasetBuilder, MathGroupBuilder, MathRLDataset, load_split
    from envs.math.calculator import CalculatorError, CalculatorLimits, evaluate
    from envs.math.data import (
        DatasetFormatError,
        MathProblem,
        Split,
        extract_gsm8k_answer,
        generate_problems,
        load_gsm8k,
        load_jsonl,
        load_math,
    )
    from envs.math.env import (
        CALCULATOR_TOOL,
        METRIC_ATTEMPTS,
        METRIC_CORRECT,
        METRIC_FORMAT,
        CalculatorMode,
        EnvPreset,
        MathEnv,
        MathEnvConfig,
        supports_tools,
    )
    from envs.math.grading import (
        Grader,
        GraderConfig,
        GradeResult,
        GraderStats,
        GradeStatus,
        default_grader,
        extract_boxed,
        normalize_answer,
    )

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "CALCULATOR_TOOL",
    "METRIC_ATTEMPTS",
    "METRIC_CORRECT",
    "METRIC_FORMAT",
    "CalculatorError",
    "CalculatorLimits",
    "CalculatorMode",
    "DatasetFormatError",
    "EnvPreset",
    "GradeResult",
    "GradeStatus",
    "Grader",
    "GraderConfig",
    "GraderStats",
    "MathDatasetBuilder",
    "MathEnv",
    "MathEnvConfig",
    "MathGroupBuilder",
    "MathProblem",
    "MathRLDataset",
    "Split",
    "default_grader",
    "evaluate",
    "extract_boxed",
    "extract_gsm8k_answer",
    "generate_problems",
    "load_gsm8k",
    "load_jsonl",
    "load_math",
    "load_split",
    "normalize_answer",
    "supports_tools",
]
