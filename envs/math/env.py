"""The math environment: single-turn, multi-turn with feedback, and with a calculator tool.

One :class:`MathEnv` (a token-in/token-out :class:`envs.core.ChatEnv`) covers the three games;
:class:`MathEnvConfig` (in :mod:`envs.math.config`) selects them (see :meth:`MathEnvConfig.preset`):

- single turn (``max_attempts=1``): reward ``1[correct] + format_coef * (1[format ok] - 1)``,
  where the format is ok when the reply has a ``\\boxed{}`` answer and stopped cleanly (a
  truncated or unparseable reply is a fault and costs ``-format_coef``).
- feedback (``max_attempts=k``): a wrong answer gets ``feedback`` as a user message, up to k
  attempts; a correct answer at attempt ``a`` earns ``attempt_decay ** (a - 1)``; the format
  term applies to every attempt. The whole episode is one token sequence (one datum).
- a series (``problems_per_episode=k``): k problems asked one after another in one
  conversation; when a problem is done (correct, or its attempts used up) the next question
  follows in the same user message as the verdict. Each problem's reward (as above) is divided
  by k, so an episode's return stays in the single game's range. A faulty reply (cut at
  ``max_tokens``, unparseable) costs ``format_coef / k`` and counts as an attempt without an
  answer; the series goes on.
- thinking (``thinking=True``): the questions ask for ``<think>...</think>`` before the answer;
  ``math/thinking`` is the fraction of assistant messages with a thinking block (a thinking part
  once the renderer parsed it, or a literal ``<think>...</think>``).
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
from collections.abc import Sequence

from tinker_cookbook.renderers import Message, Renderer, ToolCall, ToolSpec, get_text_content

from envs.core import ChatEnv, EnvLimits, Fault, FaultPolicy, Reply
from envs.math.calculator import CalculatorError, evaluate
from envs.math.config import CalculatorMode, EnvPreset, MathEnvConfig
from envs.math.data import MathProblem
from envs.math.grading import Grader, GradeStatus, default_grader, last_boxed

__all__ = [
    "CALCULATOR_TOOL",
    "METRIC_ATTEMPTS",
    "METRIC_CORRECT",
    "METRIC_FORMAT",
    "METRIC_THINKING",
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
METRIC_THINKING = "math/thinking"
"""Episode metric: fraction of the assistant messages that had a thinking block."""

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


def fewshot_messages(instruction: str, *, thinking: bool = False) -> list[Message]:
    """The solved example that :attr:`MathEnvConfig.fewshot` puts before the question (with
    ``thinking``, the reasoning is a thinking part before the boxed answer)."""
    question: Message = {
        "role": "user",
        "content": "Tom has 3 boxes with 4 pens in each box. How many pens does he have?" + instruction,
    }
    if thinking:
        answer: Message = {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "3 boxes with 4 pens each: 3 * 4 = 12."},
                {"type": "text", "text": "The answer is \\boxed{12}."},
            ],
        }
    else:
        answer = {"role": "assistant", "content": "3 boxes with 4 pens each: 3 * 4 = 12. \\boxed{12}"}
    return [question, answer]


_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


def has_complete_thinking(message: Message) -> bool:
    """Whether ``message`` has a thinking block: a non-empty thinking part, or ``<think>...</think>``
    in its text."""
    content = message.get("content")
    if isinstance(content, list) and any(
        p.get("type") == "thinking" and str(p.get("thinking", "")).strip() for p in content
    ):
        return True
    return bool(_THINK_BLOCK.search(get_text_content(message)))


class MathEnv(ChatEnv):
    """A math problem as a chat game; see the module docstring.

    Args:
        renderer: a cookbook renderer.
        problem: the question and reference answer.
        config: the game (attempts, feedback, calculator, reward shape, thinking).
        grader: the grader to use (default: the process-wide :func:`default_grader`).
        follow_ups: the problems asked after ``problem``, in order (a series:
            ``config.problems_per_episode - 1`` of them; fewer ends the series early).
    """

    def __init__(
        self,
        renderer: Renderer,
        problem: MathProblem,
        config: MathEnvConfig | None = None,
        *,
        grader: Grader | None = None,
        follow_ups: Sequence[MathProblem] = (),
    ):
        self.config = config or MathEnvConfig()
        series = self.config.problems_per_episode
        # a faulty reply (cut, unparseable) costs the format term; in a series it is graded as an
        # attempt without an answer and the series goes on, so one cut turn does not end it
        penalty = FaultPolicy(reward=-self.config.format_coef / series, end_episode=series == 1)
        faults = dict.fromkeys(Fault, penalty)
        # a malformed calculator call is answered with an error result (see _calculate) and counts
        # against the calculator budget: the game opts in to see it (on_fault below)
        faults[Fault.MALFORMED_TOOL_CALL] = FaultPolicy(end_episode=False)
        super().__init__(
            renderer,
            limits=EnvLimits(
                max_turns=self.config.max_turns, max_trajectory_tokens=self.config.max_trajectory_tokens
            ),
            faults=faults,
        )
        self.problems = (problem, *follow_ups)
        """Every problem of the episode, in the order they are asked."""
        self.problem = problem
        """The problem being asked now."""
        self.solved = 0
        """Problems answered correctly so far."""
        self.messages_seen = 0
        """Assistant messages received."""
        self.thinking_messages = 0
        """Assistant messages that had a thinking block."""
        self.grader = grader
        mode = self.config.calculator_mode
        if mode is CalculatorMode.AUTO:
            mode = CalculatorMode.TOOL if supports_tools(renderer) else CalculatorMode.TAG
        elif mode is CalculatorMode.TOOL and not supports_tools(renderer):
            raise ValueError(f"renderer {type(renderer).__name__} has no tool format; use calculator='tag'")
        self.calculator_mode = mode
        """The resolved calculator mode (never ``AUTO``)."""
        self.tools = [CALCULATOR_TOOL] if mode is CalculatorMode.TOOL else []
        self.attempts = 0
        """Answers given so far (all problems)."""
        self._problem_attempts = 0
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
            prefix = self.tool_prompt(system)
        else:
            if self.calculator_mode is CalculatorMode.TAG:
                system = f"{system}\n\n{_TAG_INSTRUCTIONS}".strip()
            if system:
                prefix = [{"role": "system", "content": system}]
        if self.config.fewshot:
            prefix += fewshot_messages(self.config.question_instruction, thinking=self.config.thinking)
        return [
            *prefix,
            {"role": "user", "content": self.problem.question + self.config.question_instruction},
        ]

    async def on_fault(self, fault: Fault, message: Message | None) -> Reply:
        if fault is Fault.MALFORMED_TOOL_CALL and message is not None:
            return await self.on_message(message)  # _calculator_calls answers the malformed calls
        return await super().on_fault(fault, message)

    async def on_message(self, message: Message) -> Reply:
        self.messages_seen += 1
        self.thinking_messages += int(has_complete_thinking(message))
        if self.calculator_mode is not CalculatorMode.OFF:
            calls = self._calculator_calls(message)
            if calls:
                return self._calculate(calls)
        return await self._answer(get_text_content(message))

    async def _answer(self, text: str) -> Reply:
        cfg = self.config
        self.attempts += 1
        self._problem_attempts += 1
        boxed = last_boxed(text)
        formatted = boxed is not None
        self.formatted_attempts += int(formatted)
        grade = await (self.grader or default_grader()).grade(boxed, self.problem.answer)
        self.grade_statuses.append(grade.status)
        correct = formatted and grade.correct
        reward = cfg.format_coef * (float(formatted) - 1.0)
        if correct:
            reward += cfg.attempt_decay ** (self._problem_attempts - 1)
            self.solved += 1
        reward /= len(self.problems)
        logs: dict[str, str | int | float] = {
            "reference": self.problem.answer,
            "extracted": boxed if boxed is not None else "<none>",
            "grade": str(grade.status),
        }
        problem_done = correct or self._problem_attempts >= cfg.max_attempts
        asked = self.problems.index(self.problem) + 1
        if problem_done and asked < len(self.problems):
            verdict = "Correct." if correct else f"Incorrect, the answer was {self.problem.answer}."
            self.problem = self.problems[asked]
            self._problem_attempts = 0
            question = f"{verdict} Next question: {self.problem.question}{cfg.question_instruction}"
            return Reply(messages=[{"role": "user", "content": question}], reward=reward, logs=logs)
        if problem_done:
            metrics = {
                METRIC_CORRECT: self.solved / len(self.problems),
                METRIC_FORMAT: self.formatted_attempts / self.attempts,
                METRIC_ATTEMPTS: float(self.attempts),
                METRIC_THINKING: self.thinking_messages / max(self.messages_seen, 1),
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
        if last_boxed(text) is not None and text.rfind("\\boxed") > text.rfind("</calc>"):
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
