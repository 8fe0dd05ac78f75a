"""The local backend's compute thread: all of its torch work runs on this one thread.

Trainer calls, sampling engine steps, model loads and merges are queued on one worker thread and
run in submission order, work from several clients interleaved (as one accelerator serves the
streams of several processes); callers wait on futures, never on the thread itself.

Why one thread: PyTorch's CPU wheels run their parallel ops on OpenMP, and GNU OpenMP (libgomp)
keeps a pool of helper threads for every thread that ran a parallel region. Once the pools hold
more threads than the machine has cores, an idle helper spins ~100 times instead of ~300,000
before it sleeps, so every parallel op pays a futex wake-up: measured on a 2-core machine, small
ops ran ~10x slower on any thread once a second thread had run one parallel
op. With the trainer, each sampling engine and client creation on threads of their own, the main
job sampled ~2.2x and trained ~1.3x slower than with all of it on one thread (same numbers).
With one pool the helpers spin long enough to catch the next op, which two processes on the same
cores must not do against each other: :mod:`backend._openmp` shortens the spinning.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

THREAD_NAME = "turngym-device"
"""Name of the compute thread (``threading.current_thread().name`` in work run on it)."""

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_NAME)


def submit(fn: Callable[[], T]) -> Future[T]:
    """Queue ``fn`` on the compute thread (raises ``RuntimeError`` once the interpreter is
    shutting down)."""
    return _executor.submit(fn)


def run(fn: Callable[[], T]) -> T:
    """``fn()`` on the compute thread, waiting for its result (inline when already on it).

    For torch work outside the backend that shares the process with it, such as a benchmark's
    peer: on the compute thread it adds no OpenMP pool."""
    return fn() if on_device() else submit(fn).result()


def on_device() -> bool:
    """Whether the caller runs on the compute thread."""
    return threading.current_thread().name.startswith(THREAD_NAME)
