"""Names, outcomes and the report of the conformance checker."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class CheckName(StrEnum):
    """One property the conformance checker verifies."""

    PICKLE = "builder_pickles"
    """The builder survives ``pickle.dumps`` / ``pickle.loads`` (rollouts ship builders to workers)."""
    MAKE_ENVS = "make_envs"
    """``make_envs()`` returns a non-empty sequence of ``Env`` with async ``initial_observation``/``step``."""
    INITIAL_OBSERVATION = "initial_observation"
    """``initial_observation()`` returns ``(ModelInput, StopCondition)`` (in-vocabulary tokens, a
    non-empty stop condition of ints or of strings) or ``InitialObservationOverflow``."""
    NO_RAISE = "step_never_raises"
    """``step`` never raises (nor hangs) on any drawn action: random, empty, invalid UTF-8,
    max length, the stop token alone, well-formed."""
    STEP_TYPES = "step_result_types"
    """``step`` returns a ``StepResult`` with a numeric reward, a bool ``episode_done``, a
    ``ModelInput`` of in-vocabulary tokens, a stop condition and numeric metrics."""
    FINITE_REWARDS = "finite_rewards"
    """Every reward (and every metric) is a finite number."""
    EPISODE_BUDGET = "episode_budget"
    """Every episode ends within its declared turn budget (``env.limits.max_turns``,
    ``env.max_turns``, else the checker's ``max_steps``)."""
    EXTENSION = "extension_property"
    """When the renderer claims the extension property for a turn, the next observation starts
    with the previous observation + the action (checked after clean replies: text, tool calls,
    the env's own messages)."""
    NON_BLOCKING = "non_blocking_steps"
    """No single ``step`` blocks the event loop longer than the threshold."""
    TOOL_PROTOCOL = "tool_calls_answered"
    """When an episode goes on after an assistant message with tool calls, each call is answered
    by exactly one ``tool``-role message carrying its ``tool_call_id`` (not a ``user`` message,
    none left unanswered). Checked on envs that keep their conversation at ``env.messages``."""
    GROUP_ISOLATION = "envs_independent"
    """The envs of a group share no mutable state: env 1 plays a scripted episode the same
    whether or not env 0 of its group played first (checked on groups of two or more envs whose
    episodes are deterministic for a seed)."""
    CLEANUP = "cleanup_idempotent"
    """``cleanup()`` can be called twice after ``make_envs`` without raising."""


class Outcome(StrEnum):
    """The result of one check."""

    PASS = "pass"
    """The property held on everything tried."""
    FAIL = "fail"
    """The property broke; the detail says where and how."""
    NOT_RUN = "not_run"
    """The check could not run (no tokenizer, no episode past its first turn...): the report
    fails, unless the caller allowed it (``allow_skip``), which makes it a :attr:`SKIP`."""
    SKIP = "skip"
    """Not applicable by declaration (a one-turn env, a renderer that claims no extension, a
    single ``Env``), not reached after an earlier failure, or not run and allowed."""


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check, with a one-paragraph detail."""

    check: CheckName
    """Which check."""
    outcome: Outcome
    """Pass, fail or skip."""
    detail: str
    """Evidence for a pass, the precise failure, or why it was skipped."""


@dataclass(frozen=True)
class ConformanceReport:
    """All check results for one env source, and what the run covered."""

    target: str
    """What was checked (``module:attr`` or a repr)."""
    results: tuple[CheckResult, ...]
    """One result per :class:`CheckName`, in order."""
    actions: int = 0
    """Actions stepped in total."""
    episodes: int = 0
    """Episodes started in total."""
    crashes: int = 0
    """Steps that raised or hung."""
    seconds: float = 0.0
    """Wall-clock duration of the run."""
    stats: Mapping[str, Any] = field(default_factory=dict)
    """Extra counters (action kinds, longest episode...)."""

    @property
    def ok(self) -> bool:
        """True when no check failed and every check ran (or was allowed not to)."""
        return not self.failures

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """The failed checks and those that could not run (not allowed)."""
        return tuple(r for r in self.results if r.outcome in (Outcome.FAIL, Outcome.NOT_RUN))

    def __getitem__(self, check: CheckName | str) -> CheckResult:
        name = CheckName(check)
        for result in self.results:
            if result.check == name:
                return result
        raise KeyError(f"no result for check {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``--json`` output)."""
        return {
            "target": self.target,
            "ok": self.ok,
            "results": [
                {"check": str(r.check), "result": str(r.outcome), "detail": r.detail} for r in self.results
            ],
            "actions": self.actions,
            "episodes": self.episodes,
            "crashes": self.crashes,
            "seconds": round(self.seconds, 3),
            "stats": dict(self.stats),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)

    def summary(self) -> str:
        """One line: target, verdict, coverage."""
        if self.ok:
            verdict = "OK"
        else:
            parts = [f"{r.check}{' not run' if r.outcome == Outcome.NOT_RUN else ''}" for r in self.failures]
            verdict = f"FAILED ({', '.join(parts)})"
        return f"{self.target}: {verdict}; {self.coverage()} in {self.seconds:.1f}s"

    def coverage(self) -> str:
        """``actions=… episodes=… [tool_calls=… malformed_tool_calls=…] extension_turns=… crashes=…``."""
        stats = self.stats
        tools = (
            f"tool_calls={stats.get('tool_calls', 0)} malformed_tool_calls={stats.get('malformed_tool_calls', 0)} "
            if stats.get("tools")
            else ""
        )
        return (
            f"actions={self.actions} episodes={self.episodes} {tools}"
            f"extension_turns={stats.get('extension_turns', 0)} crashes={self.crashes}"
        )

    def __str__(self) -> str:
        width = max(len(str(c)) for c in CheckName)
        lines = [self.summary()]
        for r in self.results:
            lines.append(f"  {r.outcome.upper():7s}  {r.check!s:{width}s}  {r.detail}")
        return "\n".join(lines)

    def rich_table(self) -> Any:
        """A ``rich.table.Table`` of check, result, detail."""
        from rich.table import Table

        table = Table(title=f"Conformance of {self.target}", show_lines=False)
        table.add_column("check", style="bold")
        table.add_column("result")
        table.add_column("detail", overflow="fold")
        style = {
            Outcome.PASS: "green",
            Outcome.FAIL: "bold red",
            Outcome.NOT_RUN: "bold red",
            Outcome.SKIP: "yellow",
        }
        for r in self.results:
            table.add_row(str(r.check), f"[{style[r.outcome]}]{r.outcome}[/]", r.detail)
        table.caption = f"{self.coverage()} in {self.seconds:.1f}s"
        return table
