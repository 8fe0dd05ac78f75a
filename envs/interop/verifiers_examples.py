"""Two verifiers environments written with verifiers' own API (``verifiers.v1``), built in code
from data generated here (offline; the Environments Hub needs a network), for the adapter's
tests, the interop bench and the docs:

- ``verifiers:arith-retry`` (multi-turn): a ``vf.Env`` whose ``run()`` asks an arithmetic
  question and, after a wrong answer, says so and asks again (up to 3 tries); the task's
  ``@vf.reward`` scores the last answer, a ``@vf.metric`` counts the tries.
- ``verifiers:calculator`` (tools): a single-turn task whose ``vf.Toolset`` offers ``add`` and
  ``multiply`` (``@vf.tool``); ``@vf.reward`` scores the final answer, ``@vf.metric`` counts the
  tool results.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import verifiers.v1 as vf

from envs.interop.verifiers import VerifiersSpec

TASKS = 64
"""Tasks per taskset (task ``i`` is drawn from ``random.Random(i)``)."""
TRIES = 3
"""Tries of ``arith-retry``."""


def last_number(text: str) -> int | None:
    """The last integer in ``text`` (None when there is none)."""
    found = re.findall(r"-?\d+", text)
    return int(found[-1]) if found else None


class ArithData(vf.TaskData):
    answer: int
    """The expected number."""


class ArithTask(vf.Task[ArithData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def correct(self, task: ArithData, trace: vf.Trace) -> float:
        return float(last_number(trace.last_reply) == task.answer)

    @vf.metric
    async def tries(self, trace: vf.Trace) -> float:
        return float(len(trace.assistant_messages))


class ArithTaskset(vf.Taskset[ArithTask, vf.TasksetConfig]):
    def load(self) -> Iterator[ArithTask]:
        for i in range(TASKS):
            rng = random.Random(i)
            a, b = rng.randint(2, 30), rng.randint(2, 30)
            yield ArithTask(
                ArithData(  # pyright: ignore[reportCallIssue] (a Field default pyright misreads)
                    prompt=f"What is {a} + {b}? Answer with one number.",
                    system_prompt="You are good at arithmetic.",
                    answer=a + b,
                )
            )


class ArithRetryConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()
    tries: int = TRIES


class ArithRetryEnv(vf.Env[ArithRetryConfig]):
    """Ask; after a wrong answer say so and ask again, up to ``config.tries`` times."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            for _ in range(self.config.tries - 1):
                if segment.terminated:
                    return
                guess = last_number(segment.last_reply)
                if guess == task.data.answer:  # type: ignore[attr-defined]
                    return
                said = "That is not a number." if guess is None else f"{guess} is not right."
                segment = await interaction.turn(f"{said} Try again: answer with one number.")


def arith_retry() -> VerifiersSpec:
    """``verifiers:arith-retry``."""
    taskset = ArithTaskset(vf.TasksetConfig(id="turngym-arith"))
    # model_construct: validating an EnvConfig resolves its taskset id among the installed
    # verifiers plugins, and this taskset is built here, not installed
    return VerifiersSpec(taskset, ArithRetryEnv, ArithRetryConfig.model_construct(tries=TRIES))


class Calculator(vf.Toolset):
    @vf.tool
    def add(self, a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first number.
            b: the second number.
        """
        return a + b

    @vf.tool
    def multiply(self, a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: the first number.
            b: the second number.
        """
        return a * b


class CalculatorTask(vf.Task[ArithData, vf.State, vf.TaskConfig]):
    @classmethod
    def toolsets(cls, config: vf.TaskConfig) -> list[vf.Toolset]:
        return [Calculator(vf.ToolsetConfig())]

    @vf.reward
    async def correct(self, task: ArithData, trace: vf.Trace) -> float:
        return float(last_number(trace.last_reply) == task.answer)

    @vf.metric
    async def tool_results(self, trace: vf.Trace) -> float:
        return float(len(trace.tool_messages))


class CalculatorTaskset(vf.Taskset[CalculatorTask, vf.TasksetConfig]):
    def load(self) -> Iterator[CalculatorTask]:
        for i in range(TASKS):
            rng = random.Random(1000 + i)
            a, b, c = rng.randint(11, 99), rng.randint(11, 99), rng.randint(2, 999)
            yield CalculatorTask(
                ArithData(  # pyright: ignore[reportCallIssue] (a Field default pyright misreads)
                    prompt=f"Use the tools to compute {a} * {b} + {c}, then answer with the number.",
                    answer=a * b + c,
                )
            )


def calculator() -> VerifiersSpec:
    """``verifiers:calculator``."""
    return VerifiersSpec(CalculatorTaskset(vf.TasksetConfig(id="turngym-calculator")))
