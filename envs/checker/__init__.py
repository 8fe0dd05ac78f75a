"""Env conformance checker: does a token-level env behave under everything a sampler can send?

``python -m envs.check module:Builder`` (or :func:`check_conformance` from Python) runs an env
source through the :class:`CheckName` checks and returns a :class:`ConformanceReport`.
"""

from envs.checker._report import CheckName, CheckResult, ConformanceReport, Outcome
from envs.checker._run import (
    CheckConfig,
    ConformanceRun,
    FuzzStats,
    check_conformance,
    declared_budget,
    describe_action,
    fuzz_env,
    pickle_problem,
    step_result_problem,
)
from envs.checker._strategies import (
    WELL_FORMED_TEXTS,
    ActionKind,
    env_actions,
    env_limits,
    fault_policies,
    invalid_utf8_fragments,
    stop_tokens,
    well_formed_action,
)

__all__ = [
    "WELL_FORMED_TEXTS",
    "ActionKind",
    "CheckConfig",
    "CheckName",
    "CheckResult",
    "ConformanceReport",
    "ConformanceRun",
    "FuzzStats",
    "Outcome",
    "check_conformance",
    "declared_budget",
    "describe_action",
    "env_actions",
    "env_limits",
    "fault_policies",
    "fuzz_env",
    "invalid_utf8_fragments",
    "pickle_problem",
    "step_result_problem",
    "stop_tokens",
    "well_formed_action",
]
