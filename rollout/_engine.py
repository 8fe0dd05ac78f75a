"""The engine: global limiters, batches of groups, and streaming of groups as they finish.

Structured concurrency throughout: every group is a task of one anyio task group per batch or
stream, every rollout a task of its group's task group. Nothing outlives the call that started
it: when ``run_batch`` returns or raises, or the ``stream`` context exits, no task is left.
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

from rollout._call import check_takes_call
from rollout._config import EngineConfig
from rollout._metrics import summarize
from rollout._results import BatchAborted, BatchResult, GroupOutcome, TrajectoryStats
from rollout._runner import run_episode
from rollout._strategy import run_group


class RolloutEngine:
    """Runs groups of episodes with one policy under one :class:`EngineConfig`.

    The two global limiters (``anyio.Semaphore`` s of concurrent sampling calls and concurrent
    env calls, see :func:`_limiter`) are shared by every call made on this engine within one
    event loop, including concurrent batches and streams.

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
        if self.config.seed is not None:
            check_takes_call(policy)
        self._limiters: tuple[anyio.lowlevel.EventLoopToken, _Limiters] | None = None

    def _current_limiters(self) -> _Limiters:
        """The sampling and env-step limiters of the running event loop (``None``: no cap); an
        engine used from a new event loop gets fresh ones."""
        token = anyio.lowlevel.current_token()
        if self._limiters is None or self._limiters[0] != token:
            self._limiters = (
                token,
                (_limiter(self.config.max_concurrent_samples), _limiter(self.config.max_concurrent_env_steps)),
            )
        return self._limiters[1]

    async def run_episode(self, env: Env) -> tuple[Trajectory, TrajectoryStats]:
        """One episode (no strategy: failures raise)."""
        samples, steps = self._current_limiters()
        return await run_episode(self.policy, env, self.config, sample_limiter=samples, step_limiter=steps)

    async def run_group(self, builder: EnvGroupBuilder, index: int = 0) -> GroupOutcome:
        """One group under the configured strategy (failures are recorded, not raised)."""
        samples, steps = self._current_limiters()
        return await run_group(
            builder, self.policy, self.config, index=index, sample_limiter=samples, step_limiter=steps
        )

    async def _spawn_groups(
        self,
        builders: Sequence[EnvGroupBuilder],
        sink: Callable[[GroupOutcome], None],
    ) -> bool:
        """Run all groups, passing each outcome to ``sink``; True if aborted by a failure."""
        group_limiter = _limiter(self.config.max_concurrent_groups) or contextlib.nullcontext()
        aborted = False
        samples, steps = self._current_limiters()

        async def one(i: int) -> None:
            nonlocal aborted
            async with group_limiter:
                outcome = await run_group(
                    builders[i], self.policy, self.config, index=i, sample_limiter=samples, step_limiter=steps
                )
            sink(outcome)
            if self.config.strategy.abort_batch and outcome.failure is not None:
                aborted = True
                groups.cancel_scope.cancel()

        async with anyio.create_task_group() as groups:
            for i in range(len(builders)):
                groups.start_soon(one, i)
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


_Limiters = tuple[anyio.Semaphore | None, anyio.Semaphore | None]


def _limiter(limit: int | None) -> anyio.Semaphore | None:
    """A cap of ``limit`` concurrent holders (``None``: no cap): ``anyio.Semaphore(limit,
    fast_acquire=True)``, FIFO like a ``CapacityLimiter``.

    Why not ``anyio.CapacityLimiter``: it tracks each holder (a task lookup on every acquire and
    release) and, when full, queues an ``asyncio.Event`` per waiter after two failed tries;
    ``bench/rollout_engine.py``'s 64 x 8 envs behind 64 tokens wait on nearly every turn, and
    the limiter was about a third of the engine's CPU per turn there, which the hand-off
    latency (and so the wall time) follows. The semaphore queues one future per waiter and,
    with ``fast_acquire``, takes a free token without a trip through the event loop (the
    awaited call inside is the checkpoint).
    """
    return None if limit is None else anyio.Semaphore(limit, fast_acquire=True)


async def rollout_batch(
    builders: Sequence[EnvGroupBuilder], policy: TokenCompleter, config: EngineConfig | None = None
) -> BatchResult:
    """Shortcut for ``await RolloutEngine(policy, config).run_batch(builders)``."""
    return await RolloutEngine(policy, config).run_batch(builders)
