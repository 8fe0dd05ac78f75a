"""What a math game looks like: :class:`MathEnvConfig` (chz, cheap to import: no tinker, no sympy).

``python -m envs.math.train`` exposes the whole config as nested command-line keys
(``env.max_attempts=3``, ``env.calculator=auto``) and still rejects a bad key in well under a
second. Its defaults are THE default game (single turn, no tool); nothing else re-declares them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import chz

from envs.math.calculator import CalculatorLimits

__all__ = [
    "THINKING_INSTRUCTION",
    "THINKING_RENDERER",
    "CalculatorMode",
    "EnvPreset",
    "MathEnvConfig",
    "ProblemsData",
]

THINKING_INSTRUCTION = (
    " Think step by step inside <think> </think>, then write your final answer in \\boxed{}."
)
"""Appended to every question in the thinking setting (instead of :attr:`MathEnvConfig.instruction`)."""

THINKING_RENDERER = "qwen3"
"""The renderer of the thinking setting when none is named: the cookbook's ``qwen3`` (parses
``<think>`` blocks into thinking parts; strips them from history every turn unless compacted or
``turngym/qwen3_preserve_thinking`` is named)."""


class CalculatorMode(StrEnum):
    """Whether and how the model can call the calculator."""

    OFF = "off"
    """No calculator."""
    AUTO = "auto"
    """The renderer's tool format when it supports tools, else the ``<calc>`` tag."""
    TOOL = "tool"
    """The renderer's tool-call format (``create_conversation_prefix_with_tools``)."""
    TAG = "tag"
    """``<calc>expression</calc>`` in the reply text; works with any renderer."""


class EnvPreset(StrEnum):
    """The three standard games (:meth:`MathEnvConfig.preset`)."""

    SINGLE = "single"
    """One attempt, no tool (the defaults)."""
    FEEDBACK = "feedback"
    """Up to 3 attempts with "incorrect, try again" feedback (``max_attempts=3``)."""
    CALCULATOR = "calculator"
    """One attempt with a calculator tool (``calculator=auto``)."""


_PRESETS: dict[EnvPreset, dict[str, Any]] = {
    EnvPreset.SINGLE: {},
    EnvPreset.FEEDBACK: {"max_attempts": 3},
    EnvPreset.CALCULATOR: {"calculator": CalculatorMode.AUTO},
}


@chz.chz
class MathEnvConfig:
    """What the math game looks like (shared by every env of a dataset; picklable, frozen)."""

    format_coef: float = 0.1
    """Weight of the format term ``format_coef * (1[format ok] - 1)``."""
    max_attempts: int = 1
    """Answers allowed; more than 1 gives feedback after a wrong answer."""
    attempt_decay: float = 0.5
    """A correct answer at attempt ``a`` earns ``attempt_decay ** (a - 1)``."""
    feedback: str = "Your answer is incorrect, try again. Put your final answer in \\boxed{}."
    """The user message after a wrong answer."""
    no_answer_feedback: str = "I could not find a \\boxed{} answer. Put your final answer in \\boxed{}."
    """The user message after a reply without a boxed answer (when attempts remain)."""
    calculator: CalculatorMode = CalculatorMode.OFF
    """Whether the model can call a calculator, and how (``off``, ``auto``, ``tool``, ``tag``)."""
    max_calculator_calls: int = 6
    """Calculator calls allowed per episode (further calls get an error result)."""
    calculator_limits: CalculatorLimits = chz.field(default_factory=CalculatorLimits)
    """Size and time bounds of one calculation."""
    system_prompt: str = ""
    """Optional system prompt (tool instructions are added to it)."""
    instruction: str = " Write your final answer in \\boxed{}."
    """Appended to every question."""
    fewshot: bool = True
    """Start with one solved example (user question, assistant answer ending in ``\\boxed{}``):
    small models otherwise rarely use the box at all."""
    max_trajectory_tokens: int | None = None
    """Observation length cap of an episode (see :class:`envs.core.EnvLimits`)."""
    problems_per_episode: int = 1
    """Problems asked one after another in one conversation (each with ``max_attempts``
    answers); more than 1 makes long multi-turn episodes. Rewards are averaged over them."""
    thinking: bool = False
    """The thinking setting: every question asks for step-by-step thinking inside
    ``<think> </think>`` before the boxed answer (:data:`THINKING_INSTRUCTION` replaces
    ``instruction``), the few-shot example thinks, ``math/thinking`` counts the answers with a
    thinking block, and envs built without a renderer name use :data:`THINKING_RENDERER`."""

    @chz.validate
    def _check(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if not 0 <= self.attempt_decay <= 1:
            raise ValueError(f"attempt_decay must be in [0, 1], got {self.attempt_decay}")
        if self.format_coef < 0:
            raise ValueError(f"format_coef must be >= 0, got {self.format_coef}")
        if self.max_calculator_calls < 0:
            raise ValueError(f"max_calculator_calls must be >= 0, got {self.max_calculator_calls}")
        if self.calculator not in tuple(CalculatorMode):
            raise ValueError(
                f"calculator must be one of {[str(m) for m in CalculatorMode]}, got {self.calculator!r}"
            )
        if self.max_trajectory_tokens is not None and self.max_trajectory_tokens < 1:
            raise ValueError(f"max_trajectory_tokens must be >= 1 or None, got {self.max_trajectory_tokens}")
        if self.problems_per_episode < 1:
            raise ValueError(f"problems_per_episode must be >= 1, got {self.problems_per_episode}")

    @classmethod
    def preset(cls, name: EnvPreset | str, **overrides: Any) -> MathEnvConfig:
        """The config of a standard game (:class:`EnvPreset`), with field overrides."""
        return cls(**{**_PRESETS[EnvPreset(name)], **overrides})

    @property
    def calculator_mode(self) -> CalculatorMode:
        """:attr:`calculator` as a :class:`CalculatorMode` (a plain string is accepted too)."""
        return CalculatorMode(self.calculator)

    @property
    def max_turns(self) -> int:
        """Assistant turns an episode can take (attempts of every problem + calculator calls + one spare)."""
        calls = self.max_calculator_calls + 1 if self.calculator_mode is not CalculatorMode.OFF else 0
        return self.max_attempts * self.problems_per_episode + calls

    @property
    def question_instruction(self) -> str:
        """What follows every question: :attr:`instruction`, or :data:`THINKING_INSTRUCTION` when
        :attr:`thinking`."""
        return THINKING_INSTRUCTION if self.thinking else self.instruction

    def renderer_name_for(self, renderer_name: str | None) -> str | None:
        """The renderer envs of this game use: ``renderer_name``, else :data:`THINKING_RENDERER`
        when :attr:`thinking` (None: the model's recommended one)."""
        return renderer_name or (THINKING_RENDERER if self.thinking else None)


@chz.chz
class ProblemsData:
    """The data keys of an env served math problems (``python -m envs.math.train`` and
    ``envs.code.train``: ``data.source=gsm8k``, ``data.batch_size=8``...): the fields of
    :class:`~envs.math.builders.ProblemsDatasetBuilder` under the same names, with the train
    commands' defaults (the command passes them to the builder as they are)."""

    source: str = "generated"
    """``generated`` (offline), ``gsm8k``, ``math`` or ``jsonl``."""
    path: str | None = None
    """Local data file; ``{split}`` becomes ``train`` / ``test`` (None + gsm8k/math: the hub)."""
    test_path: str | None = None
    """Local test file, when it does not follow ``path``'s pattern."""
    levels: str = "1,2"
    """Generator difficulty levels (1-5, comma separated)."""
    n_train: int = 2000
    """Training problems (at most)."""
    n_test: int = 32
    """Held-out problems (at most)."""
    batch_size: int = 4
    """Problems (groups) per training step."""
    group_size: int = 4
    """Samples per problem (the GRPO group)."""

    @chz.validate
    def _check(self) -> None:
        from envs.math._keys import check_data_keys

        check_data_keys(self.source, self.levels)
        if self.batch_size < 1 or self.group_size < 1:
            raise ValueError(
                f"data.batch_size and data.group_size must be >= 1, got {self.batch_size}, {self.group_size}"
            )
