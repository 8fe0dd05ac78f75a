"""Futures with the three access patterns of tinker's ``APIFuture``.

``fut.result()`` blocks the calling thread, ``await fut`` and ``await fut.result_async()`` suspend
the calling coroutine. The work itself always runs on the compute thread (:mod:`._device`), so
awaiting never blocks the event loop, and ``.result()`` called from inside a running loop only
blocks that loop until the work is done (it cannot deadlock: the compute thread never needs the
loop).

Cancelling the awaiting task cancels the underlying :class:`concurrent.futures.Future`
(``asyncio.wrap_future`` propagates it): work not yet started is skipped, and the sampling
engine drops cancelled requests between rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, Generic, TypeVar

from tinker.lib.public_interfaces.api_future import APIFuture

from . import _device as device
from ._errors import LocalBackendError

T = TypeVar("T")
U = TypeVar("U")
C = TypeVar("C")


class LocalFuture(APIFuture[T], Generic[T]):
    """A tinker-compatible future over a :class:`concurrent.futures.Future`.

    Usable as ``fut.result()``, ``await fut`` and ``await fut.result_async()``.
    """

    def __init__(self, future: Future[T]) -> None:
        self._future: Future[T] = future

    def result(self, timeout: float | None = None) -> T:
        """Block until the result is ready (``TimeoutError`` after ``timeout`` seconds).

        Raises :class:`~._errors.LocalBackendError` when called, unfinished, from work running
        on the backend's compute thread (a custom loss function waiting on a sample, say): that
        thread would wait for itself."""
        if not self._future.done() and device.on_device():
            raise LocalBackendError(
                "waiting on an unfinished local future from the backend's compute thread would "
                "deadlock (it runs the work being waited for)"
            )
        return self._future.result(timeout)

    async def result_async(self, timeout: float | None = None) -> T:
        """Await the result without blocking the event loop."""
        async with asyncio.timeout(timeout):
            return await asyncio.wrap_future(self._future)

    def future(self) -> Future[T]:
        """The underlying :class:`concurrent.futures.Future` (cancelling it cancels the work)."""
        return self._future

    def done(self) -> bool:
        """Whether the operation has finished (successfully, with an error, or cancelled)."""
        return self._future.done()

    def cancel(self) -> bool:
        """Cancel the operation; returns ``False`` when it has already finished."""
        return self._future.cancel()

    @classmethod
    def completed(cls, value: T) -> LocalFuture[T]:
        """A future that is already resolved with ``value``."""
        fut: Future[T] = Future()
        fut.set_result(value)
        return cls(fut)

    def __repr__(self) -> str:
        state = "done" if self._future.done() else "pending"
        return f"<{type(self).__name__} {state}>"


class ClientFuture(LocalFuture[C], Generic[C]):
    """Future of a client, as returned by ``create_*_client`` methods.

    Like tinker's ``Backcompat*ClientFuture`` it can also be used directly as the client
    (deprecated in tinker, and here it warns likewise): attribute access waits for the client.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        warnings.warn(
            f"reading `.{name}` from a client future; call .result() or await it first",
            FutureWarning,
            stacklevel=2,
        )
        return getattr(self._future.result(), name)


def resolve(future: Future[T], fn: Callable[[], T]) -> None:
    """Run ``fn`` and store its result or exception in ``future`` unless it was cancelled."""
    if future.cancelled():
        return
    try:
        value = fn()
    except BaseException as exc:
        safe_set_exception(future, exc)
    else:
        safe_set_result(future, value)


def safe_set_result(future: Future[T], value: T) -> None:
    """``future.set_result`` that ignores futures cancelled meanwhile."""
    with contextlib.suppress(InvalidStateError):
        future.set_result(value)


def safe_set_exception(future: Future[Any], exc: BaseException) -> None:
    """``future.set_exception`` that ignores futures cancelled meanwhile."""
    with contextlib.suppress(InvalidStateError):
        future.set_exception(exc)


def then(future: Future[T], fn: Callable[[T], U]) -> Future[U]:
    """A future of ``fn(result of future)``, computed when ``future`` finishes (on the thread that
    finishes it; ``fn`` must be light). Errors carry over, and cancellation both ways."""
    out: Future[U] = Future()

    def done(f: Future[T]) -> None:
        if f.cancelled():
            out.cancel()
        elif (exc := f.exception()) is not None:
            safe_set_exception(out, exc)
        else:
            resolve(out, lambda: fn(f.result()))

    future.add_done_callback(done)
    out.add_done_callback(lambda o: future.cancel() if o.cancelled() else None)
    return out


def submit(fn: Callable[[], T]) -> LocalFuture[T]:
    """Run ``fn`` on the compute thread and return a :class:`LocalFuture` of its result.

    The returned future stays *pending* (never "running") until ``fn`` finishes, so a caller
    can cancel it at any time; ``fn`` is then skipped if it has not started.
    """
    fut: Future[T] = Future()
    device.submit(lambda: resolve(fut, fn))
    return LocalFuture(fut)


def submit_client(fn: Callable[[], C]) -> ClientFuture[C]:
    """Like :func:`submit`, for client-creating work: returns a :class:`ClientFuture`."""
    fut: Future[C] = Future()
    device.submit(lambda: resolve(fut, fn))
    return ClientFuture(fut)
