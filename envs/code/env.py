"""The code-execution environment: math problems solved with a sandboxed Python tool.

:class:`CodeEnv` is :class:`envs.math.MathEnv` (same problems, same grader, same reward:
``1[correct] + format_coef * (1[boxed] - 1)``, attempts and feedback) with a ``run_python(code)``
tool in place of the calculator. A call runs the code in a :class:`envs.code.sandbox.Sandbox`
(a fresh process per call: nothing is kept between calls) and the model sees what it printed
(stdout and stderr, cut to ``output_chars``) as a ``tool`` message, followed by the error line
when the call failed. A failed call (an exception, a time, memory or output limit, a forbidden
operation, a malformed or unknown call) costs ``failed_call_cost`` and is counted in the step's
metrics; the episode goes on. Calls do not count as attempts; at most ``max_tool_calls`` per
episode.

With a renderer that has a tool-call format the tool is declared with
``create_conversation_prefix_with_tools`` (:attr:`ToolFormat.TOOL`); with any other renderer the
model writes a fenced block (```` ```python ... ``` ````) and stops, and the output comes back
in a user message (:attr:`ToolFormat.TAG`).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tinker_cookbook.renderers import Message, Renderer, ToolCall, ToolSpec, get_text_content

from envs.code.config import CodeEnvConfig, ToolFormat
from envs.code.sandbox import RunResult, RunStatus, Sandbox, sandbox_for
from envs.core import EnvLimits, Reply
from envs.math.data import MathProblem
from envs.math.env import MathEnv, supports_tools
from envs.math.grading import Grader, last_boxed

if TYPE_CHECKING:  # hypothesis is imported only when a strategy is asked for
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "METRIC_FAILED_CALLS",
    "METRIC_TOOL_CALLS",
    "PROGRAMS",
    "PYTHON_TOOL",
    "CodeEnv",
    "code_action_messages",
    "format_run",
]

PYTHON_TOOL: ToolSpec = {
    "name": "run_python",
    "description": (
        "Run a Python 3 program and return what it prints (stdout and stderr). Standard library "
        "only; no network; each call starts from scratch."
    ),
    "parameters": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "the program; print() what you need"}},
        "required": ["code"],
    },
}
"""The tool's specification (OpenAI function format)."""

METRIC_TOOL_CALLS = "code/tool_calls"
"""Episode metric: tool calls made."""
METRIC_FAILED_CALLS = "code/failed_tool_calls"
"""Episode metric: tool calls that failed (see the module docstring)."""

_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_TAG_INSTRUCTIONS = (
    "You can run Python: write a program in a ```python code block and stop; what it prints comes "
    "back in <output> tags. Standard library only, no network, each program starts from scratch."
)


def format_run(result: RunResult, max_chars: int) -> str:
    """What the model sees of a run: its output (head and tail when longer than ``max_chars``),
    then ``Error: <detail>`` when it failed; ``(no output)`` for a silent success."""
    text = result.output
    if len(text) > max_chars:
        head, tail = max_chars * 2 // 3, max_chars // 3
        text = f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}"
    if result.ok:
        return text.rstrip("\n") if text.strip() else "(no output)"
    if result.status is RunStatus.ERROR and result.exit_code == 1 and text.strip():
        return text.rstrip("\n")  # the traceback says it all
    return f"{text.rstrip()}\nError: {result.detail}".lstrip("\n")


PROGRAMS: tuple[str, ...] = (
    "print(6 * 7)",
    "print(sum(range(101)))",
    "import math\nprint(math.comb(10, 3), math.sqrt(2))",
    "from fractions import Fraction\nprint(Fraction(3, 4) + Fraction(1, 6))",
    "x = [i * i for i in range(10)]\nprint(x)",
    "",
    "print('é ✓ 中文')",
    "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe not utf-8\\n')",
    "print('x' * 100000)",
    "1 / 0",
    "def f(:\n    pass",
    "raise SystemExit(3)",
    "import os\nprint(os.listdir('.'))",
    "print(open('/etc/passwd').read())",
    "import socket\nsocket.create_connection(('127.0.0.1', 9))",
    "b = bytearray(10 * 1024**3)",
)
"""Quick programs worth running in checks and fuzzing: results, errors, limits and forbidden
operations (``envs.code.escapes`` has the slow ones: endless loops, fork bombs...)."""


def code_action_messages(tool_format: ToolFormat = ToolFormat.TOOL) -> SearchStrategy[Message]:
    """Assistant messages worth drawing for a :class:`CodeEnv` (a hypothesis strategy): one or
    two ``run_python`` calls of :data:`PROGRAMS` or of drawn text, and boxed answers."""
    from hypothesis import strategies as st

    code = st.one_of(st.sampled_from(PROGRAMS), st.text(max_size=40))
    answer = st.integers(-1000, 100_000).map(lambda n: f"So the answer is \\boxed{{{n}}}.")
    answers = answer.map(lambda text: {"role": "assistant", "content": text})
    if tool_format is ToolFormat.TAG:
        blocks = code.map(lambda c: {"role": "assistant", "content": f"```python\n{c}\n```"})
        return st.one_of(blocks, answers)  # type: ignore[return-value]

    def message(programs: list[str]) -> Message:
        calls = [
            ToolCall(
                function=ToolCall.FunctionBody(name="run_python", arguments=json.dumps({"code": c})),
                id=f"call_{i}",
            )
            for i, c in enumerate(programs)
        ]
        return {"role": "assistant", "content": "", "tool_calls": calls}

    return st.one_of(st.lists(code, min_size=1, max_size=2).map(message), answers)  # type: ignore[return-value]


def fewshot_messages(instruction: str, tool_format: ToolFormat) -> list[Message]:
    """The solved example that :attr:`CodeEnvConfig.fewshot` puts before the question."""
    question: Message = {
        "role": "user",
        "content": "A shop sells 37 boxes of 24 pencils and 5 loose pencils. How many pencils?" + instruction,
    }
    code = "print(37 * 24 + 5)"
    answer: Message = {"role": "assistant", "content": "37 * 24 + 5 = 893. \\boxed{893}"}
    if tool_format is ToolFormat.TOOL:
        call = ToolCall(
            function=ToolCall.FunctionBody(name="run_python", arguments=json.dumps({"code": code})),
            id="call_0",
        )
        return [
            question,
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "893", "tool_call_id": "call_0", "name": "run_python"},
            answer,
        ]
    return [
        question,
        {"role": "assistant", "content": f"```python\n{code}\n```"},
        {"role": "user", "content": "<output>\n893\n</output>"},
        answer,
    ]


class CodeEnv(MathEnv):
    """A math problem with a sandboxed Python tool; see the module docstring.

    Args:
        renderer: a cookbook renderer.
        problem: the question and reference answer.
        config: the game (attempts, tool budget, sandbox limits, reward shape).
        grader: the grader (default: the process-wide :func:`envs.math.default_grader`).
        sandbox: the sandbox (default: :func:`sandbox_for` ``(config.sandbox)``).
    """

    def __init__(
        self,
        renderer: Renderer,
        problem: MathProblem,
        config: CodeEnvConfig | None = None,
        *,
        grader: Grader | None = None,
        sandbox: Sandbox | None = None,
    ):
        self.code_config = config or CodeEnvConfig()
        """The code game (``self.config`` is the math game that grades answers)."""
        super().__init__(renderer, problem, self.code_config.math_config(), grader=grader)
        self.limits = EnvLimits(
            max_turns=self.code_config.max_turns, max_trajectory_tokens=self.code_config.max_trajectory_tokens
        )
        fmt = self.code_config.tool_format
        if fmt is ToolFormat.AUTO:
            fmt = ToolFormat.TOOL if supports_tools(renderer) else ToolFormat.TAG
        elif fmt is ToolFormat.TOOL and not supports_tools(renderer):
            raise ValueError(f"renderer {type(renderer).__name__} has no tool format; use tool_format='tag'")
        self.tool_format = fmt
        """The resolved tool format (never ``AUTO``)."""
        self.tools = [PYTHON_TOOL] if fmt is ToolFormat.TOOL else []
        self.sandbox = sandbox or sandbox_for(self.code_config.sandbox)
        self.tool_calls = 0
        """Tool calls made so far."""
        self.failed_calls = 0
        """Tool calls that failed so far."""
        self.runs: list[RunResult] = []
        """Every run of this episode, in order."""

    # --- game ----------------------------------------------------------------------------
    def initial_messages(self) -> list[Message]:
        cfg = self.code_config
        if self.tool_format is ToolFormat.TOOL:
            prefix: list[Message] = self.tool_prompt(cfg.system_prompt)
        else:
            system = f"{cfg.system_prompt}\n\n{_TAG_INSTRUCTIONS}".strip()
            prefix: list[Message] = [{"role": "system", "content": system}]
        if cfg.fewshot:
            prefix += fewshot_messages(cfg.instruction, self.tool_format)
        return [*prefix, {"role": "user", "content": self.problem.question + cfg.instruction}]

    def action_messages(self) -> SearchStrategy[Message]:
        """:func:`code_action_messages` in this env's tool format (runs that succeed, fail, hit
        a limit or a forbidden operation; boxed answers)."""
        return code_action_messages(self.tool_format)

    async def on_message(self, message: Message) -> Reply:
        # a malformed call arrives here too (MathEnv.on_fault opts in): a failed tool call
        calls = self._code_calls(message)
        if calls:
            return await self._run_calls(calls)
        return await self._answer(get_text_content(message))

    async def _answer(self, text: str) -> Reply:
        reply = await super()._answer(text)
        if not reply.done:
            return reply
        metrics = {k: v for k, v in reply.metrics.items() if k != "math/calculator_calls"}
        metrics[METRIC_TOOL_CALLS] = float(self.tool_calls)
        metrics[METRIC_FAILED_CALLS] = float(self.failed_calls)
        return replace(reply, metrics=metrics)

    # --- the tool ------------------------------------------------------------------------
    def _code_calls(self, message: Message) -> list[tuple[str | None, str, str | None]]:
        """(code, error, tool call id) of each call in the message; code None: a bad call."""
        if self.tool_format is ToolFormat.TOOL:
            out: list[tuple[str | None, str, str | None]] = []
            for call in message.get("tool_calls", []) or []:
                code, error = _code_of(call)
                out.append((code, error, call.id))
            for bad in message.get("unparsed_tool_calls", []) or []:
                out.append((None, f"malformed tool call: {bad.error[:120]}", None))
            return out
        text = get_text_content(message)
        if last_boxed(text) is not None and text.rfind("\\boxed") > text.rfind("```"):
            return []  # an answer after the last block: it is an answer
        return [(m.group(1), "", None) for m in _FENCE.finditer(text)]

    async def _run_calls(self, calls: list[tuple[str | None, str, str | None]]) -> Reply:
        cfg = self.code_config
        messages: list[Message] = []
        failed = 0
        statuses: dict[str, float] = {}
        for code, error, call_id in calls:
            self.tool_calls += 1
            if self.tool_calls > cfg.max_tool_calls:
                content = "Error: tool budget exhausted; give your final answer in \\boxed{}"
                ok = False
            elif code is None:
                content = f"Error: {error}"
                ok = False
            else:
                result = await self.sandbox.run(code)
                self.runs.append(result)
                statuses[f"code/status/{result.status}"] = (
                    statuses.get(f"code/status/{result.status}", 0.0) + 1
                )
                content = format_run(result, cfg.output_chars)
                ok = result.ok
            failed += not ok
            messages.append(self._tool_message(content, call_id))
        self.failed_calls += failed
        metrics = {"code/calls": float(len(calls)), "code/failed_calls": float(failed), **statuses}
        return Reply(messages=messages, reward=-cfg.failed_call_cost * failed, metrics=metrics)

    def _tool_message(self, content: str, call_id: str | None) -> Message:
        # no lone surrogate (from escaped JSON arguments echoed back) reaches the tokenizer
        content = content.encode("utf-8", "replace").decode("utf-8")
        if self.tool_format is ToolFormat.TOOL:
            msg: Message = {"role": "tool", "content": content, "name": "run_python"}
            if call_id is not None:
                msg["tool_call_id"] = call_id
            return msg
        return {"role": "user", "content": f"<output>\n{content}\n</output>"}


def _code_of(call: ToolCall) -> tuple[str | None, str]:
    if call.function.name != "run_python":
        return None, f"unknown tool {call.function.name[:40]!r}; the tool is run_python"
    try:
        args: Any = json.loads(call.function.arguments or "{}")
    except ValueError:
        return None, "the arguments are not JSON"
    code = args.get("code") if isinstance(args, dict) else None
    if not isinstance(code, str):
        return None, "missing 'code' argument (a string)"
    return code, ""
