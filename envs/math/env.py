"""The math environment: single-turn, multi-turn with feedback, and with a calculator tool.

One :class:`MathEnv` (a token-in/token-out :class:`envs.core.ChatEnv`) covers the three games;
:class:`MathEnvConfig` (in :mod:`envs.math.config`) selects them (see :meth:`MathEnvConfig.preset`):

- single turn (``max_attempts=1``): reward ``1[correct] + format_coef * (1[format ok] - 1)``,
  where the format is ok when the reply has a ``\\boxed{}`` answer and stopped cleanly (a
  truncated or unparseable reply is a fault and costs ``-format_coef``).
- feedback (``max_attempts=k``): a wrong answer gets ``feedback`` as a user message, up to k
  attempts; a correct answer at attempt ``a`` earns ``attempt_decay ** (a - 1)``; the format
  term applies to every attempt. The whole episode is one token sequence (one datum).
- calculator: the model may call a ``calculator`` tool, in the renderer's own tool-call format
  when it has one (``CalculatorMode.TOOL``), else by writing ``<calc>expression</calc>``
  (``CalculatorMode.TAG``); the result comes back as a tool message (a user message with
  ``<calc_result>`` in tag mode). Calls do not count as attempts; at most
  ``max_calculator_calls`` per episode.

Grading goes through a :class:`envs.math.grading.Grader` and never blocks the event loop.
"""

from __future__ import annotations

import json
import re

from tinker_cookbook.renderers import Message, Renderer, ToolCall, ToolSpec, get_text_content

from envs.core import ChatEnv, EnvLimits, Fault, FaultPolicy, Reply
from envs.math.calculator import CalculatorError, evaluate
from envs.math.config import CalculatorMode, EnvPreset, MathEnvConfig
from envs.math.data import MathProblem
from envs.math.grading import Grader, GradeStatus, default_grader, extract_boxed

__all__ = [
    "CALCULATOR_TOOL",
    "METRIC_ATTEMPTS",
    "METRIC_CORRECT",
    "METRIC_FORMAT",
    "CalculatorMode",
    "EnvPreset",
    "MathEnv",
    "MathEnvConfig",
    "fewshot_messages",
    "supports_tools",
]

CALCULATOR_TOOL: ToolSpec = {
    "name": "calculator",
    "description": "Evaluate an arithmetic expression (numbers, + - * / // % ^ and parentheses).",
    "parameters": {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. (12 + 3) * 4 / 5"}},
        "required": ["expression"],
    },
}
"""The calculator's tool specification (OpenAI function format)."""

METRIC_CORRECT = "math/correct"
"""Episode metric: 1.0 when the final answer is correct."""
METRIC_FORMAT = "math/format"
"""Episode metric: fraction of answers that had a ``\\boxed{}``."""
METRIC_ATTEMPTS = "math/attempts"
"""Episode metric: answers given."""

_CALC_TAG = re.compile(r"<calc>(.*?)</calc>", re.DOTALL)


def supports_tools(renderer: Renderer) -> bool:
    """Whether the renderer has a native tool-call format."""
    try:
        renderer.create_conversation_prefix_with_tools([CALCULATOR_TOOL])
    except NotImplementedError:
        return False
    return True


_TAG_INSTRUCTIONS = (
    "You can use a calculator: write <calc>expression</calc> (numbers, + - * / ^ and parentheses) "
    "and stop; the result comes back in <calc_result> tags."
)


def fewshot_messages(instruction: str) -> list[Message]:
    """The solved example that :attr:`MathEnvConfig.fewshot` puts before the question."""
    return [
        {
            "role": "user",
            "content": "Tom has 3 boxes with 4 pens in each box. How many pens does he have?" + instruction,
        },
        {"role": "assistant", "content": "3 boxes with 4 pens each: 3 * 4 = 12. \\boxed{12}"},
    ]


class MathEnv(ChatEnv):
    """A math problem as a chat game; see the module docstring.

    Args:
        renderer: a cookbook renderer.
        problem: the question and reference answer.
        config: the game (attempts, feedback, calculator, reward shape).
        grader: the grader to use (default: the process-wide :func:`default_grader`).
    """

    def __init__(
        self,
        renderer: Renderer,
        problem: MathProblem,
        config: MathEnvConfig | None = None,
        *,
        grader: Grader | None = None,
    ):
        self.config = config or MathEnvConfig()
        penalty = FaultPolicy(reward=-self.config.format_coef)
        super().__init__(
            renderer,
            limits=EnvLimits(
                max_turns=self.config.max_turns, max_trajectory_tokens=self.config.max_trajectory_tokens
            ),
            faults=dict.fromkeys(Fault, penalty),
        )
        self.problem = problem
        self.grader = grader
        mode = self.config.calculator_mode
        if mode is CalculatorMode.AUTO:
            mode = CalculatorMode.TOOL if supports_tools(renderer) else CalculatorMode.TAG
        elif mode is CalculatorMode.TOOL and not supports_tools(renderer):
            raise ValueError(f"renderer {type(renderer).__name__} has no tool format; use calculator='tag'")
        self.calculator_mode = mode
        """The resolved calculator mode (never ``AUTO``)."""
        self.attempts = 0
        """Answers given so far."""
        self.calculator_calls = 0
        """Calculator calls made so far."""
        self.formatted_attempts = 0
        """Answers that had a ``\\boxed{}``."""
        self.grade_statuses: list[GradeStatus] = []
        """How each answer was graded."""

    # --- game ----------------------------------------------------------------------------
    def initial_messages(self) -> list[Message]:
        system = self.config.system_prompt
        prefix: list[Message] = []
        if self.calculator_mode is CalculatorMode.TOOL:
            prefix = list(self.renderer.create_conversation_prefix_with_tools([CALCULATOR_TOOL], system))
        else:
            if self.calculator_mode is CalculatorMode.TAG:
                system = f"{system}\n\n{_TAG_INSTRUCTIONS}".strip()
            if system:
                prefix = [{"role": "system", "content": system}]
        if self.config.fewshot:
            prefix += fewshot_messages(self.config.instruction)
        return [*prefix, {"role": "user", "content": self.problem.question + self.config.instruction}]

    async def on_message(self, message: Message) -> Reply:
        if self.calculator_mode is not CalculatorMode.OFF:
            calls = self._calculator_calls(message)
            if calls:
                return self._calculate(calls)
        return await self._answer(get_text_content(message))

    async def _answer(self, text: str) -> Reply:
        cfg = self.config
        self.attempts += 1
        boxed = extract_boxed(text)
        formatted = boxed is not None
        self.formatted_attempts += int(formatted)
        grade = await (self.grader or default_grader()).grade(boxed, self.problem.answer)
        self.grade_statuses.append(grade.status)
        correct = formatted and grade.correct
        reward = cfg.format_coef * (float(formatted) - 1.0)
        if correct:
            reward += cfg.attempt_decay ** (self.attempts - 1)
        logs: dict[str, str | int | float] = {
            "reference": self.problem.answer,
            "extracted": boxed if boxed is not None else "<none>",
            "grade": str(grade.status),
        }
        done = correct or self.attempts >= cfg.max_attempts
        if done:
            metrics = {
                METRIC_CORRECT: float(correct),
                METRIC_FORMAT: self.formatted_attempts / self.attempts,
                METRIC_ATTEMPTS: float(self.attempts),
                "math/calculator_calls": float(self.calculator_calls),
                "math/grade_timeout": float(GradeStatus.TIMEOUT in self.grade_statuses),
            }
            return Reply(reward=reward, done=True, metrics=metrics, logs=logs)
        feedback = cfg.feedback if formatted else cfg.no_answer_feedback
        return Reply(messages=[{"role": "user", "content": feedback}], reward=reward, logs=logs)

    # --- calculator ----------------------------------------------------------------------
    def _calculator_calls(self, message: Message) -> list[tuple[str, str | None]]:
        """(expression, tool call id) of each calculator call in the message."""
        if self.calculator_mode is CalculatorMode.TOOL:
            out: list[tuple[str, str | None]] = []
            for call in message.get("tool_calls", []) or []:
                out.append((_expression_of(call), call.id))
            for bad in message.get("unparsed_tool_calls", []) or []:
                out.append(("\x00malformed tool call: " + bad.error, None))
            return out
        text = get_text_content(message)
        if extract_boxed(text) is not None and text.rfind("\\boxed") > text.rfind("</calc>"):
            return []  # an answer after the last calculation: it is an answer
        return [(m.group(1), None) for m in _CALC_TAG.finditer(text)]

    def _calculate(self, calls: list[tuple[str, str | None]]) -> Reply:
        messages: list[Message] = []
        errors = 0
        for expression, call_id in calls:
            self.calculator_calls += 1
            if self.calculator_calls > self.config.max_calculator_calls:
                result = "error: calculator budget exhausted; give your final answer in \\boxed{}"
                errors += 1
            elif expression.startswith("\x00"):
                result = f"error: {expression[1:][:120]}"
                errors += 1
            else:
                try:
                    result = evaluate(expression, self.config.calculator_limits)
                except CalculatorError as e:
                    result = f"error: {e}"
                    errors += 1
            if self.calculator_mode is CalculatorMode.TOOL:
                msg: Message = {"role": "tool", "content": result, "name": "calculator"}
                if call_id is not None:
                    msg["tool_call_id"] = call_id
                messages.append(msg)
            else:
                messages.append({"role": "user", "content": f"<calc_result>{result}</calc_result>"})
        metrics = {"math/calculator/calls": float(len(calls)), "math/calculator/errors": float(errors)}
        return Reply(messages=messages, metrics=metrics)


def _expression_of(call: ToolCall) -> str:
    if call.function.name != "calculator":
        return f"\x00unknown tool {call.function.name!r}"
    try:
        args = json.loads(call.function.arguments or "{}")
    except ValueError:
        return "\x00arguments are not JSON"
    expression = args.get("expression") if isinstance(args, dict) else None
    if not isinstance(expression, str | int | float):
        return "\x00missing 'expression' argument"
    return str(expression)
