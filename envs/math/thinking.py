"""Thinking for the math env: the instruction, and a scripted solver that thinks before it answers.

A small model does not write ``<think>...</think>`` blocks on its own; a short supervised warm
start on scripted thinking transcripts teaches it (``env.thinking=true warm_start.episodes=...``
of ``python -m envs.math.train``; :meth:`envs.math.MathDatasetBuilder.scripted_episodes`). :class:`ThinkingSolver` is the scripted player of those
transcripts: for every question it writes a short step-by-step reasoning as a thinking part
(the renderer frames it as ``<think>\\n...\\n</think>\\n\\n``) and then the answer in
``\\boxed{}``. It reads the question from the conversation and takes the answer from the problems
it is given, so it is right every time; its reasoning decomposes the generator's arithmetic
(``a + b``, ``a - b``, ``a * b`` by tens and ones) and states the result otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.math.config import THINKING_INSTRUCTION
from envs.math.data import MathProblem

__all__ = ["THINKING_INSTRUCTION", "ThinkingSolver", "reasoning_for"]


_BINARY = re.compile(r"What is (\d+) ([+\-*]) (\d+)\?")


def _split(b: int) -> tuple[int, int]:
    return b - b % 10, b % 10


def reasoning_for(question: str, answer: str) -> str:
    """A short step-by-step reasoning that ends in ``answer`` (see the module docstring)."""
    m = _BINARY.search(question)
    if m is None:
        return f"I work out what the question asks for. The result is {answer}."
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    tens, ones = _split(b)
    if b < 10 or ones == 0:
        steps = f"{a} {op} {b} = {answer}."
    elif op == "+":
        steps = f"{a} + {b} = {a} + {tens} + {ones} = {a + tens} + {ones} = {a + b}."
    elif op == "-":
        steps = f"{a} - {b} = {a} - {tens} - {ones} = {a - tens} - {ones} = {a - b}."
    else:
        steps = f"{a} * {b} = {a} * {tens} + {a} * {ones} = {a * tens} + {a * ones} = {a * b}."
    return f"The question asks for {a} {op} {b}. {steps}"


class ThinkingSolver(MessageCompleter):
    """Answers the last question of the conversation: thinking part, then ``\\boxed{answer}``.

    Args:
        problems: the problems it may be asked (matched by question text in the last user message).
        thinking: write the thinking part (False: the boxed answer alone, for a non-thinking setting).
    """

    def __init__(self, problems: Sequence[MathProblem], *, thinking: bool = True):
        if not problems:
            raise ValueError("ThinkingSolver needs the problems it will be asked")
        self.problems = tuple(problems)
        self.thinking = thinking

    def problem_in(self, messages: Sequence[Message]) -> MathProblem:
        """The problem whose question the last user message asks."""
        last = next((get_text_content(m) for m in reversed(messages) if m["role"] == "user"), "")
        found = [p for p in self.problems if p.question in last]
        if not found:
            raise ValueError(f"no known problem in the last user message {last[:80]!r}")
        return max(found, key=lambda p: len(p.question))

    async def __call__(self, messages: list[Message]) -> Message:
        problem = self.problem_in(messages)
        answer = f"The answer is \\boxed{{{problem.answer}}}."
        if not self.thinking:
            return {"role": "assistant", "content": answer}
        return {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": reasoning_for(problem.question, problem.answer)},
                {"type": "text", "text": answer},
            ],
        }
