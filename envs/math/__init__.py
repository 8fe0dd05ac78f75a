"""Math environments: single-turn, multi-turn with feedback, calculator tool; grading that never blocks.

- Env: :class:`MathEnv` configured by :class:`MathEnvConfig` (chz; presets :class:`EnvPreset`:
  ``single``, ``feedback``, ``calculator``; :class:`CalculatorMode`).
- Grading: :class:`Grader` (worker processes, hard timeout, in-process fast path),
  :class:`GraderConfig`, :class:`GradeResult`, :class:`GradeStatus`,
  :func:`default_grader`, :func:`normalize_answer`.
- Calculator: :func:`evaluate` (safe ``ast`` arithmetic), :class:`CalculatorLimits`,
  :class:`CalculatorError`.
- Data: :class:`MathProblem`, :func:`generate_problems` (seeded, offline), :func:`load_gsm8k`,
  :func:`load_math`, :func:`load_jsonl`, :func:`load_split`, :func:`check_source` (validate
  before a model loads), :class:`DatasetFormatError`, :class:`Split`.
- Thinking: :class:`ThinkingSolver` (the scripted solver of warm starts; the rest of
  thinking support lives in :mod:`envs.math.thinking`).
- Builders: :class:`MathGroupBuilder`, :class:`MathDatasetBuilder` (chz;
  scripts warm-start episodes) on :class:`ProblemsDatasetBuilder` (the data keys and splits, which
  the code env's builder shares).
- Entry points: ``python -m envs.math.train`` and ``python -m envs.math.eval``.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
