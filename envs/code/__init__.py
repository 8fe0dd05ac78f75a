"""Code execution: math problems solved with a sandboxed ``run_python`` tool, graded like math.

- Env: :class:`CodeEnv` (an :class:`envs.math.MathEnv` with a Python tool) configured by
  :class:`CodeEnvConfig`; :data:`PYTHON_TOOL`, :class:`ToolFormat`, :func:`format_run`.
- Sandbox: :class:`Sandbox` (``await sandbox.run(code)`` in a fresh, confined worker process),
  :class:`SandboxConfig`, :class:`SandboxLimits`, :class:`Isolation`, :class:`RunResult`,
  :class:`RunStatus`, :class:`SandboxStats`, :class:`SandboxUnavailable`, :func:`sandbox_for`.
- Escape attempts: :data:`ESCAPE_ATTEMPTS`, :class:`EscapeAttempt`, :class:`EscapeOutcome`,
  :func:`run_escape_attempts` (run them against any sandbox configuration),
  :func:`leftover_processes`.
- Builders: :class:`CodeGroupBuilder`, :class:`CodeRLDataset`, :class:`CodeDatasetBuilder` (chz).
- Entry point: ``python -m envs.code.train``.
"""

from typing import TYPE_CHECKING

from envs._lazy import attach

if TYPE_CHECKING:  # the public names; imported lazily at run time (envs._lazy)
    from envs.code.builders import CodeDatasetBuilder, CodeGroupBuilder, CodeRLDataset
    from envs.code.env import (
        METRIC_FAILED_CALLS,
        METRIC_TOOL_CALLS,
        PYTHON_TOOL,
        CodeEnv,
        CodeEnvConfig,
        ToolFormat,
        format_run,
    )
    from envs.code.escapes import (
        ESCAPE_ATTEMPTS,
        EscapeAttempt,
        EscapeOutcome,
        leftover_processes,
        run_escape_attempts,
    )
    from envs.code.sandbox import (
        Isolation,
        RunResult,
        RunStatus,
        Sandbox,
        SandboxConfig,
        SandboxLimits,
        SandboxStats,
        SandboxUnavailable,
        sandbox_for,
    )

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "ESCAPE_ATTEMPTS",
    "METRIC_FAILED_CALLS",
    "METRIC_TOOL_CALLS",
    "PYTHON_TOOL",
    "CodeDatasetBuilder",
    "CodeEnv",
    "CodeEnvConfig",
    "CodeGroupBuilder",
    "CodeRLDataset",
    "EscapeAttempt",
    "EscapeOutcome",
    "Isolation",
    "RunResult",
    "RunStatus",
    "Sandbox",
    "SandboxConfig",
    "SandboxLimits",
    "SandboxStats",
    "SandboxUnavailable",
    "ToolFormat",
    "format_run",
    "leftover_processes",
    "run_escape_attempts",
    "sandbox_for",
]
