"""Code execution: math problems solved with a sandboxed ``run_python`` tool, graded like math.

- Env: :class:`CodeEnv` (an :class:`envs.math.MathEnv` with a Python tool) configured by
  :class:`CodeEnvConfig`; :data:`PYTHON_TOOL`, :class:`ToolFormat`,
  :func:`code_action_messages` and :data:`PROGRAMS` (what checks and fuzzing draw).
- Sandbox: :class:`Sandbox` (``await sandbox.run(code)`` in a fresh, confined worker process),
  :class:`SandboxConfig`, :class:`SandboxLimits`, :class:`Isolation`, :class:`RunResult`,
  :class:`RunStatus`, :class:`SandboxUnavailable`.
- Escape attempts: :data:`ESCAPE_ATTEMPTS`, :class:`EscapeOutcome`,
  :func:`run_escape_attempts` (run them against any sandbox configuration).
- Builders: :class:`CodeGroupBuilder`, :class:`CodeDatasetBuilder` (chz).
- Entry point: ``python -m envs.code.train``.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
