"""Synthetic envs, builders and completers for tests and benchmarks of the rollout engine.

- :data:`ACTION`: a token action to script the policy with (the scripted policy itself is
  ``completers.ScriptedTokenCompleter``: delay, hangs, raised errors, calls in flight).
- :class:`SyntheticEnv`: an N-turn env whose observation is previous observation + action +
  ``feedback`` tokens (the extension property holds unless ``break_at`` says otherwise), with
  optional failure / hang / delay at given turns and optional CPU work offloaded to a thread.
- :class:`SyntheticGroup`: an ``EnvGroupBuilder`` of such envs that counts its calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.to_thread
import tinker
from tinker_cookbook.completers import StopCondition
from tinker_cookbook.rl.types import (
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Metrics,
    StepResult,
    Trajectory,
)


class ScriptedFailure(RuntimeError):
    """Raised by a scripted env or builder where the script says so."""


ACTION: tuple[int, ...] = (7, 8, 2)
"""A scripted action for :class:`SyntheticEnv` episodes, e.g.
``completers.ScriptedTokenCompleter([ACTION], cycle=True)`` as the policy."""


def cpu_work(n: int) -> int:
    """Pure-Python CPU work that holds the GIL (a stand-in for reward grading); importable, so
    ``anyio.to_process.run_sync(cpu_work, n)`` can run it in a worker process."""
    acc = 0
    for i in range(n):
        acc = (acc * 31 + i) % 1_000_003
    return acc


def _spin(seconds: float) -> int:
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


class SyntheticEnv(Env):
    """``turns``-turn env; observation = previous observation + action + ``feedback``."""

    def __init__(
        self,
        turns: int = 20,
        *,
        prompt: Sequence[int] = (1, 3, 4, 5),
        feedback: Sequence[int] = (9, 10),
        reward: float | Callable[[int], float] = 1.0,
        fail_at: int | None = None,
        hang_at: int | None = None,
        break_at: int | None = None,
        delay_s: float = 0.0,
        cpu_s: float = 0.0,
    ):
        self.turns = turns
        self.prompt = list(prompt)
        self.feedback = list(feedback)
        self.reward = reward
        self.fail_at = fail_at
        self.hang_at = hang_at
        self.break_at = break_at
        self.delay_s = delay_s
        self.cpu_s = cpu_s
        self.turn = 0
        self.tokens: list[int] = []
        self.steps = 0

    async def initial_observation(self) -> tuple[tinker.ModelInput, StopCondition]:
        self.tokens = list(self.prompt)
        return tinker.ModelInput.from_ints(self.tokens), [2]

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        self.turn += 1
        self.steps += 1
        if self.fail_at == self.turn:
            raise ScriptedFailure(f"scripted env failure at turn {self.turn}")
        if self.hang_at == self.turn:
            await anyio.sleep_forever()
        if self.delay_s:
            await anyio.sleep(self.delay_s)
        if self.cpu_s:
            await anyio.to_thread.run_sync(_spin, self.cpu_s)
        reward = self.reward(self.turn) if callable(self.reward) else self.reward
        done = self.turn >= self.turns
        if done:
            return StepResult(reward, True, tinker.ModelInput.empty(), [2])
        if self.break_at == self.turn:
            # Rewrite history (drop the prompt's second token): not an extension.
            self.tokens = self.tokens[:1] + self.tokens[2:] + list(action) + self.feedback
        else:
            self.tokens = self.tokens + list(action) + self.feedback
        return StepResult(reward, False, tinker.ModelInput.from_ints(self.tokens), [2])


@dataclass
class SyntheticGroup(EnvGroupBuilder):
    """A group of envs from ``factory(slot)``; counts ``make_envs`` and ``cleanup`` calls."""

    factory: Callable[[int], Env]
    """Builds the env of a slot (called again on every retry)."""
    size: int = 8
    """Envs per group."""
    make_calls: int = 0
    """``make_envs`` calls so far."""
    cleanup_calls: int = 0
    """``cleanup`` calls so far."""
    fail_make: bool = False
    """``make_envs`` raises."""
    reward_fn: Callable[[list[Trajectory]], list[float]] | None = None
    """Group rewards (default: 0 each)."""
    cleanup_delay_s: float = 0.0
    """``cleanup`` sleeps this long (it must survive cancellation)."""
    made: list[Env] = field(default_factory=list)
    """Every env made, in order."""

    async def make_envs(self) -> Sequence[Env]:
        self.make_calls += 1
        if self.fail_make:
            raise ScriptedFailure("scripted make_envs failure")
        envs = [self.factory(i) for i in range(self.size)]
        self.made.extend(envs)
        return envs

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        if self.reward_fn is None:
            return [(0.0, {}) for _ in trajectory_group]
        return [(r, {"group_reward": r}) for r in self.reward_fn(trajectory_group)]

    async def cleanup(self) -> None:
        if self.cleanup_delay_s:
            await anyio.sleep(self.cleanup_delay_s)
        self.cleanup_calls += 1

    def logging_tags(self) -> list[str]:
        return ["synthetic"]
