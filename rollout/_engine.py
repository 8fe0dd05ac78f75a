"""The engine: global gates, batches of groups, and streaming of groups as they finish.

Structured concurrency throughout: every group is a task of one :class:`rollout._tasks.Slots` (an
anyio task group's semantics on plain asyncio tasks, at half its cost per task) per batch or
stream, every rollout a slot of its group's. Nothing outlives the call that
started it: when ``run_batch`` returns or raises, or the ``stream`` context exits, no task is left.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream
from tinker_cookbook.completers import TokenCompleter
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, Trajectory

from rollout._config import EngineConfig
from rollout._metrics import summarize
from rollout._results import BatchAborted, BatchResult, GroupOutcome, TrajectoryStats
from rollout._runner import Gate, run_episode
from rollout._strategy import run_group
from rollout._tasks import Slots


class RolloutEngine:
    """Runs groups of episodes with one policy under one :class:`EngineConfig`.

    The two global gates (concurrent sampling calls, concurrent env steps) are shared by every
    call made on this engine within one event loop, including concurrent batches and streams.

    Example::

        engine = RolloutEngine(policy, EngineConfig(limits=RolloutLimits(max_turns=8)))
        result = await engine.run_batch(builders)          # all groups, in builder order
        async with engine.stream(builders) as outcomes:     # groups as they finish
            async for outcome in outcomes:
                ...
    """

    def __init__(self, policy: TokenCompleter, config: EngineConfig | None = None):
        self.policy = policy
        self.config = config or EngineConfig()
        self._gates: tuple[anyio.lowlevel.EventLoopToken, Gate, Gate] | None = None

    def _current_gates(self) -> tuple[Gate, Gate]:
        token = anyio.lowlevel.current_token()
        if self._gates is None or self._gates[0] != token:
            self._gates = (
                token,
                Gate(self.config.max_concurrent_samples),
                Gate(self.config.max_concurrent_env_steps),
            )
        return self._gates[1], self._gates[2]

    async def run_episode(self, env: Env) -> tuple[Trajectory, TrajectoryStats]:
        """One episode (no strategy: failures raise)."""
        sample_gate, step_gate = self._current_gates()
        return await run_episode(self.policy, env, self.config, sample_gate=sample_gate, step_gate=step_gate)

    async def run_group(self, builder: EnvGroupBuilder, index: int = 0) -> GroupOutcome:
        """One group under the configured strategy (failures are recorded, not raised)."""
        sample_gate, step_gate = self._current_gates()
        return await run_group(
            builder, self.policy, self.config, index=index, sample_gate=sample_gate, step_gate=step_gate
        )

    async def _spawn_groups(
        self,
        builders: Sequence[EnvGroupBuilder],
        sink: Callable[[GroupOutcome], None],
    ) -> bool:
        """Run all groups, passing each outcome to ``sink``; True if aborted by a failure."""
        limit = self.config.max_concurrent_groups
        group_limiter = anyio.CapacityLimiter(limit) if limit is not None and limit < len(builders) else None
        abort = self.config.strategy.abort_batch
        aborted = False
        policy, config = self.policy, self.config
        sample_gate, step_gate = self._current_gates()  # once per batch (a backend lookup)

        groups = Slots()

        async def one(i: int) -> None:
            nonlocal aborted
            builder = builders[i]
            if group_limiter is None:
                outcome = await run_group(
                    builder, policy, config, index=i, sample_gate=sample_gate, step_gate=step_gate
                )
            else:
                async with group_limiter:
                    outcome = await run_group(
                        builder, policy, config, index=i, sample_gate=sample_gate, step_gate=step_gate
                    )
            sink(outcome)
            if abort and outcome.failure is not None:
                aborted = True
                groups.cancel()

        await groups.run(len(builders), one, first_inline=False)  # every group a task of its own
        return aborted

    async def run_batch(self, builders: Sequence[EnvGroupBuilder]) -> BatchResult:
        """Run every group; return the outcomes in builder order with :func:`summarize` metrics.

        Raises:
            BatchAborted: a group failed under a strategy with ``abort_batch=True`` (the other
                groups were cancelled; their cleanups ran).
        """
        builders = list(builders)
        t0 = time.monotonic()
        done: list[GroupOutcome | None] = [None] * len(builders)

        def sink(outcome: GroupOutcome) -> None:
            done[outcome.index] = outcome

        aborted = await self._spawn_groups(builders, sink)
        outcomes = tuple(o for o in done if o is not None)
        result = BatchResult(outcomes=outcomes, metrics=summarize(outcomes), elapsed_s=time.monotonic() - t0)
        if aborted:
            raise BatchAborted(result, cancelled=len(builders) - len(outcomes))
        return result

    @asynccontextmanager
    async def stream(
        self, builders: Sequence[EnvGroupBuilder]
    ) -> AsyncIterator[MemoryObjectReceiveStream[GroupOutcome]]:
        """Yield groups as they finish: ``async with engine.stream(b) as s: async for o in s``.

        Leaving the block early cancels the groups still running (their cleanups run). Raises
        :class:`BatchAborted` on exit when a failure aborted the batch (``abort_batch=True``).
        """
        builders = list(builders)
        send, receive = anyio.create_memory_object_stream[GroupOutcome](max_buffer_size=math.inf)
        finished: list[GroupOutcome] = []
        aborted = False

        def sink(outcome: GroupOutcome) -> None:
            finished.append(outcome)
            # If the consumer left, the outcome is still in ``finished``.
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                send.send_nowait(outcome)

        async def produce() -> None:
            nonlocal aborted
            async with send:
                aborted = await self._spawn_groups(builders, sink)

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            try:
                async with receive:
                    yield receive
            finally:
                tg.cancel_scope.cancel()
        if aborted:
            result = BatchResult(
                outcomes=tuple(sorted(finished, key=lambda o: o.index)), metrics=summarize(finished)
            )
            raise BatchAborted(result, cancelled=len(builders) - len(finished))


async def rollout_batch(
    builders: Sequence[EnvGroupBuilder], policy: TokenCompleter, config: EngineConfig | None = None
) -> BatchResult:
    """Shortcut for ``await RolloutEngine(policy, config).run_batch(builders)``."""
    return await RolloutEngine(policy, config).run_batch(builders)
