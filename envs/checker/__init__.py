"""Env conformance checker: does a token-level env behave under everything a sampler can send?

``python -m envs.check module:Builder`` (or :func:`check_conformance` from Python) runs an env
source through the :class:`CheckName` checks and returns a :class:`ConformanceReport`. It never
passes vacuously: a check that cannot run (no tokenizer, no episode past its first turn) is
:attr:`Outcome.NOT_RUN` and fails the report unless ``allow_skip`` names it. Tool envs declare
their tools (``env.tools``) and the checker draws well-formed, wrong and malformed calls to them.
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
    make_renderer,
    pickle_problem,
    step_result_problem,
)
from envs.checker._strategies import (
    CLEAN_KINDS,
    WELL_FORMED_TEXTS,
    ActionKind,
    DrawnAction,
    drawn_actions,
    env_actions,
    env_limits,
    example_json,
    example_tool_call,
    fault_policies,
    invalid_utf8_fragments,
    json_values,
    malformed_tool_call_action,
    stop_tokens,
    tool_call_messages,
    tool_specs,
    well_formed_action,
)

__all__ = [
    "CLEAN_KINDS",
    "WELL_FORMED_TEXTS",
    "ActionKind",
    "CheckConfig",
    "CheckName",
    "CheckResult",
    "ConformanceReport",
    "ConformanceRun",
    "DrawnAction",
    "FuzzStats",
    "Outcome",
    "check_conformance",
    "declared_budget",
    "describe_action",
    "drawn_actions",
    "env_actions",
    "env_limits",
    "example_json",
    "example_tool_call",
    "fault_policies",
    "fuzz_env",
    "invalid_utf8_fragments",
    "json_values",
    "make_renderer",
    "malformed_tool_call_action",
    "pickle_problem",
    "step_result_problem",
    "stop_tokens",
    "tool_call_messages",
    "tool_specs",
    "well_formed_action",
]
