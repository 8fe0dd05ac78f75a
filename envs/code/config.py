"""What a code game looks like: :class:`CodeEnvConfig` (chz, cheap to import: no tinker, no sympy).

``python -m envs.code.train`` exposes the whole config as nested command-line keys
(``env.max_tool_calls=2``, ``env.tool_format=tag``, ``env.sandbox.limits.timeout_s=2``,
``env.sandbox.isolation=landlock``); its defaults are the default game, declared only here.
"""

from __future__ import annotations

from enum import StrEnum

import chz

from envs.code.sandbox import SandboxConfig
from envs.math.config import CalculatorMode, MathEnvConfig, ProblemsData

__all__ = ["CodeData", "CodeEnvConfig", "ToolFormat"]


class ToolFormat(StrEnum):
    """How the model calls the tool."""

    AUTO = "auto"
    """The renderer's tool-call format when it has one, else a fenced code block."""
    TOOL = "tool"
    """The renderer's tool-call format (``create_conversation_prefix_with_tools``)."""
    TAG = "tag"
    """A ```` ```python ```` block in the reply; works with any renderer."""


def _tool_format(_: object, value: object) -> ToolFormat:
    try:
        return ToolFormat(value)
    except ValueError:
        raise ValueError(
            f"tool_format must be one of {[str(f) for f in ToolFormat]}, got {value!r}"
        ) from None


@chz.chz
class CodeEnvConfig:
    """What the code game looks like (shared by every env of a dataset; picklable, frozen)."""

    format_coef: float = 0.1
    """Weight of the format term ``format_coef * (1[boxed answer] - 1)``."""
    max_attempts: int = 1
    """Answers allowed; more than 1 gives feedback after a wrong answer."""
    attempt_decay: float = 0.5
    """A correct answer at attempt ``a`` earns ``attempt_decay ** (a - 1)``."""
    max_tool_calls: int = 4
    """Tool calls allowed per episode (further calls get an error result)."""
    failed_call_cost: float = 0.0
    """Reward subtracted per failed tool call (0: failures only show in the metrics)."""
    output_chars: int = 1200
    """Characters of a run's output the model sees (head and tail kept)."""
    tool_format: ToolFormat = chz.field(default=ToolFormat.AUTO, munger=_tool_format)
    """How the model calls the tool (``auto``, ``tool``, ``tag``)."""
    sandbox: SandboxConfig = chz.field(default_factory=SandboxConfig)
    """Limits and isolation of each run (``sandbox.limits.timeout_s``, ``sandbox.isolation``...)."""
    fewshot: bool = True
    """Start with one solved example that calls the tool (small models otherwise never do)."""
    system_prompt: str = ""
    """Optional system prompt (tool instructions are added to it)."""
    instruction: str = " Write your final answer in \\boxed{}."
    """Appended to every question."""
    max_trajectory_tokens: int | None = None
    """Observation length cap of an episode (see :class:`envs.core.EnvLimits`)."""

    @chz.validate
    def _check(self) -> None:
        if self.max_tool_calls < 0:
            raise ValueError(f"max_tool_calls must be >= 0, got {self.max_tool_calls}")
        if self.output_chars < 16:
            raise ValueError(f"output_chars must be >= 16, got {self.output_chars}")
        if self.failed_call_cost < 0:
            raise ValueError(f"failed_call_cost must be >= 0, got {self.failed_call_cost}")
        self.math_config()  # the math game's own checks (attempts, decay, format weight)

    def math_config(self) -> MathEnvConfig:
        """The math game that grades the answers (no calculator, no math few-shot)."""
        return MathEnvConfig(
            format_coef=self.format_coef,
            max_attempts=self.max_attempts,
            attempt_decay=self.attempt_decay,
            calculator=CalculatorMode.OFF,
            system_prompt=self.system_prompt,
            instruction=self.instruction,
            fewshot=False,
            max_trajectory_tokens=self.max_trajectory_tokens,
        )

    @property
    def max_turns(self) -> int:
        """Assistant turns an episode can take (attempts + tool calls + one spare)."""
        return self.max_attempts + self.max_tool_calls + 1


@chz.chz
class CodeData(ProblemsData):
    """The data keys of ``python -m envs.code.train`` (:class:`~envs.math.config.ProblemsData`
    with the code env's default levels; a subclass, so that setting one key keeps the others'
    defaults)."""

    levels: str = "1,2,3"
    """Generator difficulty levels (1-5, comma separated)."""
