"""A group's slots, run concurrently with anyio task-group semantics at a fraction of the cost.

Why not ``anyio.create_task_group`` for the slots: anyio 4's ``start_soon`` builds a task handle
per task (a cancel scope, an event, a wrapping coroutine, bookkeeping in done callbacks): about
11 us per task on the bench machine, against 2 us for a bare asyncio task. A group of 8
zero-latency 20-turn rollouts spends more on that than on its extension checks
(``bench/rollout_engine.py``).

On asyncio, :class:`Slots` starts slot 0 in the calling task and the others as plain asyncio
tasks, each inside its own anyio ``CancelScope``. Cancellation keeps anyio's semantics:
:meth:`Slots.cancel` cancels those scopes (level-triggered; shields inside a slot hold), a
cancellation of the calling task cancels them all and waits for every slot before propagating,
and nothing outlives :meth:`Slots.run`. A slot that raises (slots catch ``Exception`` themselves,
so only a ``BaseException`` can) cancels the others, and the errors are raised together as a
``BaseExceptionGroup`` once all slots are done, as an anyio task group does. On any other backend
(trio), :meth:`Slots.run` is an anyio task group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from rollout._runner import _running_asyncio_loop


class Slots:
    """Run ``fn(0) .. fn(n - 1)`` concurrently (``fn(0)`` in the calling task); :meth:`cancel`
    cancels them all, as ``tg.cancel_scope.cancel()`` would in an anyio task group."""

    __slots__ = ("_cancelled", "_errors", "_remaining", "_scopes", "_waiter")

    def __init__(self) -> None:
        self._scopes: list[anyio.CancelScope] = []
        self._cancelled = False
        self._errors: list[BaseException] = []
        self._remaining = 0
        self._waiter: asyncio.Future[None] | None = None

    def cancel(self) -> None:
        """Cancel every slot (those not started yet never run their body)."""
        self._cancelled = True
        for scope in self._scopes:
            scope.cancel()

    async def run(
        self, n: int, fn: Callable[[int], Coroutine[Any, Any, None]], *, first_inline: bool = True
    ) -> None:
        """Run the slots; return when all are done. ``first_inline``: ``fn(0)`` runs in the
        calling task (one task fewer; it then shares the caller's context variables), else every
        slot is a task of its own, as under ``tg.start_soon``."""
        loop = _running_asyncio_loop()
        if loop is None:
            async with anyio.create_task_group() as tg:
                self._scopes.append(tg.cancel_scope)
                if self._cancelled:
                    tg.cancel_scope.cancel()
                for i in range(1 if first_inline else 0, n):
                    tg.start_soon(fn, i)
                if n and first_inline:
                    await fn(0)
            return
        if not n:
            return
        host = anyio.CancelScope()
        scope_type: Any = type(host)  # the backend's class: no backend lookup per scope
        self._scopes.append(host)
        tasks: list[asyncio.Task[None]] = []
        for i in range(1 if first_inline else 0, n):
            scope = scope_type()
            self._scopes.append(scope)
            tasks.append(loop.create_task(self._child(scope, fn, i)))  # kept: the loop's refs are weak
        self._remaining = len(tasks)
        if self._cancelled:
            self.cancel()
        try:
            if first_inline:
                with host:
                    await fn(0)
            if self._remaining:
                self._waiter = loop.create_future()
                await self._waiter
        except BaseException as exc:
            self.cancel()
            await self._drain(loop)
            if not isinstance(exc, asyncio.CancelledError):
                self._errors.insert(0, exc)
            if self._errors:
                raise BaseExceptionGroup("unhandled errors in a slot group", self._errors) from None
            raise
        if self._errors:
            raise BaseExceptionGroup("unhandled errors in a slot group", self._errors)

    async def _child(
        self, scope: anyio.CancelScope, fn: Callable[[int], Coroutine[Any, Any, None]], i: int
    ) -> None:
        # Bookkeeping in the task itself, not in a done callback (one scheduled callback fewer).
        try:
            with scope:
                await fn(i)
        except asyncio.CancelledError:
            raise  # not from this slot's scope: only asyncio.run's shutdown cancels these tasks
        except BaseException as exc:
            self._errors.append(exc)  # raised by run() once every slot is done
            self.cancel()
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise  # asyncio stops the loop with these, as for any task
        finally:
            self._remaining -= 1
            waiter = self._waiter
            if not self._remaining and waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait until every child task is done, whatever cancellations arrive meanwhile."""
        while self._remaining:
            self._waiter = loop.create_future()
            try:
                await self._waiter
            except asyncio.CancelledError:
                self.cancel()
