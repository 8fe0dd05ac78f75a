"""Answer grading that never blocks the event loop.

:class:`Grader` answers ``await grader.grade(answer, reference)``:

1. Too-long input is wrong at once (``GradeStatus.TOO_LONG``).
2. Fast path, in-process: both sides are normalised (:func:`normalize_answer`); an exact match
   or equal plain numbers is correct, two different integers are wrong (``GradeStatus.FAST``).
   Nothing here evaluates an expression, so it takes microseconds.
3. Otherwise a worker process checks symbolic equivalence with math-verify (sympy). Workers are
   plain subprocesses (``python _grading_core.py``) speaking JSON lines; the parent awaits their
   stdout with ``anyio.wait_readable`` (no thread, no blocking read). A worker that does not
   answer within ``timeout_s`` is killed and replaced, and the answer is scored wrong
   (``GradeStatus.TIMEOUT``, counted in :attr:`Grader.stats`). Workers also cap their own
   memory and raise a soft timeout (``0.8 * timeout_s``) where the Python code can be
   interrupted, which saves a restart.

A grader is safe to share between coroutines (at most ``workers`` symbolic checks run at once,
the rest queue), survives pickling (it pickles as its configuration; the copy starts its own
workers) and is closed at interpreter exit. :func:`default_grader` is the process-wide one the
environments use unless given another.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from envs.math._grading_core import fast_compare, last_boxed, normalize_answer

__all__ = [
    "GradeResult",
    "GradeStatus",
    "Grader",
    "GraderConfig",
    "GraderStats",
    "default_grader",
    "last_boxed",
    "normalize_answer",
]

_WORKER_SCRIPT = str(Path(__file__).with_name("_grading_core.py"))


class GradeStatus(StrEnum):
    """How a grade was decided."""

    FAST = "fast"
    """In-process, after normalisation (exact match or plain numbers)."""
    SYMBOLIC = "symbolic"
    """By a worker's symbolic check."""
    TIMEOUT = "timeout"
    """The symbolic check ran out of time (the worker was killed or interrupted); scored wrong."""
    ERROR = "error"
    """The worker failed (crash, memory cap, could not start); scored wrong."""
    TOO_LONG = "too_long"
    """The answer or reference exceeds ``max_chars``; scored wrong without looking."""


@dataclass(frozen=True)
class GradeResult:
    """The outcome of one grading."""

    correct: bool
    """Whether the answer is equivalent to the reference."""
    status: GradeStatus
    """How it was decided."""
    seconds: float
    """Wall time of the grading, queueing included."""
    detail: str = ""
    """Error message for ``ERROR``, empty otherwise."""


@dataclass(frozen=True)
class GraderConfig:
    """Configuration of a :class:`Grader`."""

    workers: int = 2
    """Worker processes (symbolic checks running at once)."""
    timeout_s: float = 2.0
    """Hard limit of one symbolic check, after which the worker is killed and replaced."""
    max_chars: int = 1000
    """Answers or references longer than this are wrong without a check."""
    worker_memory_mb: int = 3072
    """Address-space cap of each worker (0: none), so a runaway expression fails fast."""
    boot_timeout_s: float = 120.0
    """How long to wait for a (re)started worker's imports before giving up on it."""
    worker_nice: int = 10
    """Niceness added to the workers, so the event loop's process is scheduled first (0: none)."""
    soft_timeout_fraction: float = 0.8
    """The worker interrupts its own check after this fraction of ``timeout_s`` where Python code
    can be interrupted (saving a restart); 0 disables it, leaving only the hard kill."""

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"GraderConfig.workers must be >= 1, got {self.workers}")
        if self.timeout_s <= 0:
            raise ValueError(f"GraderConfig.timeout_s must be > 0, got {self.timeout_s}")


@dataclass(frozen=True)
class GraderStats:
    """Counters of a :class:`Grader` since it was created."""

    graded: int = 0
    """Gradings finished (every status)."""
    correct: int = 0
    """Of which correct."""
    fast: int = 0
    """Decided by the in-process fast path."""
    symbolic: int = 0
    """Decided by a worker."""
    timed_out: int = 0
    """Scored wrong on a timeout."""
    errors: int = 0
    """Scored wrong on a worker failure."""
    too_long: int = 0
    """Scored wrong for length."""
    restarts: int = 0
    """Workers killed and replaced."""


class _WorkerGone(Exception):
    pass


class _Worker:
    """One worker subprocess and its stdout buffer."""

    def __init__(self, memory_mb: int, nice: int):
        self.proc = subprocess.Popen(
            [sys.executable, _WORKER_SCRIPT, str(memory_mb), str(nice)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.fd_out = self.proc.stdout.fileno()
        self.fd_in = self.proc.stdin.fileno()
        os.set_blocking(self.fd_out, False)
        self.buf = bytearray()
        self.ready = False

    def send(self, obj: dict[str, Any]) -> None:
        data = (json.dumps(obj) + "\n").encode()
        try:
            view = memoryview(data)
            while view:  # bounded request on an idle worker's empty pipe: does not block
                n = os.write(self.fd_in, view)
                view = view[n:]
        except OSError as e:
            raise _WorkerGone(f"worker stdin closed: {e}") from e

    async def read(self) -> dict[str, Any]:
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[: nl + 1]
                try:
                    return json.loads(line)
                except ValueError:
                    continue
            await anyio.wait_readable(self.fd_out)
            try:
                chunk = os.read(self.fd_out, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                raise _WorkerGone(f"worker exited (code {self.proc.poll()})")
            self.buf += chunk

    async def wait_ready(self) -> None:
        while not self.ready:
            msg = await self.read()
            self.ready = bool(msg.get("ready"))

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def reap(self) -> bool:
        return self.proc.poll() is not None


class Grader:
    """A pool of grading workers with a hard per-check timeout; see the module docstring.

    Args:
        config: pool size, timeout and limits (defaults: 2 workers, 2 s).

    Use as ``async with Grader() as g:`` / ``with Grader() as g:`` or call :meth:`close`.
    Workers start lazily on the first symbolic check, or eagerly with :meth:`start`.
    """

    def __init__(self, config: GraderConfig | None = None):
        self.config = config or GraderConfig()
        self._closed = False
        self._next_id = 0
        self._counts: dict[str, int] = dict.fromkeys(GraderStats.__dataclass_fields__, 0)
        self._reset()
        _live.add(self)

    def _reset(self) -> None:
        """Forget every worker (at creation, and in a forked child: the parent's workers and
        lock are not the child's)."""
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._booting: list[_Worker] = []
        self._dead: list[_Worker] = []
        self._busy = 0
        self._spawning = 0
        self._slots: weakref.WeakKeyDictionary[Any, anyio.Semaphore] = weakref.WeakKeyDictionary()

    def __reduce__(self) -> tuple[Any, ...]:
        return (Grader, (self.config,))

    # --- lifecycle -----------------------------------------------------------------------
    def start(self) -> Grader:
        """Start the worker processes now (they import sympy in the background). Returns self."""
        while True:
            with self._lock:
                self._check_open()
                have = len(self._idle) + len(self._booting) + self._busy + self._spawning
                if have >= self.config.workers:
                    return self
                self._spawning += 1
            try:
                worker = _Worker(
                    self.config.worker_memory_mb, self.config.worker_nice
                )  # outside the lock: fork + exec
            finally:
                with self._lock:
                    self._spawning -= 1
            with self._lock:
                if not self._closed:
                    self._booting.append(worker)
                    continue
            worker.kill()
            return self

    async def warmup(self) -> None:
        """Start the workers and wait until they are all ready to grade."""
        self.start()
        with self._lock:
            booting, self._booting = self._booting, []
            self._busy += len(booting)
        try:
            with anyio.fail_after(self.config.boot_timeout_s):
                for w in booting:
                    await w.wait_ready()
        finally:
            with self._lock:
                self._busy -= len(booting)
                for w in booting:
                    (self._idle if w.ready else self._booting).append(w)

    def close(self) -> None:
        """Kill every worker (one in use is killed when its grading ends). Idempotent; later
        gradings raise ``RuntimeError``. Reaping the killed processes may block for a few ms."""
        with self._lock:
            self._closed = True
            workers = self._idle + self._booting + self._dead
            self._idle, self._booting, self._dead = [], [], []
        for w in workers:
            w.kill()
        for w in workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(timeout=2)

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Grader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    @property
    def stats(self) -> GraderStats:
        """A snapshot of the counters."""
        with self._lock:
            return GraderStats(**self._counts)

    # --- grading -------------------------------------------------------------------------
    async def grade(self, answer: str | None, reference: str) -> GradeResult:
        """Whether ``answer`` is equivalent to ``reference``. Never blocks the event loop for
        longer than a normalisation; never raises for bad input (a missing answer is wrong)."""
        t0 = time.perf_counter()
        self._check_open()
        if answer is None:
            return self._done(False, GradeStatus.FAST, t0)
        limit = self.config.max_chars
        if len(answer) > limit or len(reference) > limit:
            return self._done(False, GradeStatus.TOO_LONG, t0)
        fast = fast_compare(normalize_answer(answer), normalize_answer(reference))
        if fast is not None:
            return self._done(fast, GradeStatus.FAST, t0)
        async with self._slot():
            return await self._grade_in_worker(answer, reference, t0)

    async def grade_boxed(self, response: str, reference: str) -> GradeResult:
        """Grade the last ``\\boxed{}`` of a response (no box: wrong)."""
        return await self.grade(last_boxed(response), reference)

    async def _grade_in_worker(self, answer: str, reference: str, t0: float) -> GradeResult:
        worker = await self._checkout()
        clean = False
        try:
            if not worker.ready:
                with anyio.move_on_after(self.config.boot_timeout_s):
                    await worker.wait_ready()
                if not worker.ready:
                    return self._done(False, GradeStatus.ERROR, t0, "worker did not start in time")
            with self._lock:
                self._next_id += 1
                rid = self._next_id
            worker.send(
                {
                    "i": rid,
                    "a": answer,
                    "r": reference,
                    "t": self.config.soft_timeout_fraction * self.config.timeout_s,
                }
            )
            reply: dict[str, Any] | None = None
            with anyio.move_on_after(self.config.timeout_s):
                reply = await worker.read()
                while reply.get("i") != rid:
                    reply = await worker.read()
            if reply is None:
                return self._done(False, GradeStatus.TIMEOUT, t0)
            clean = True
            status = GradeStatus(reply.get("s", "error"))
            return self._done(bool(reply.get("ok")), status, t0, str(reply.get("e", "")))
        except _WorkerGone as e:
            return self._done(False, GradeStatus.ERROR, t0, str(e))
        finally:
            self._checkin(worker, clean)

    # --- pool ----------------------------------------------------------------------------
    def _slot(self) -> anyio.Semaphore:
        token = anyio.lowlevel.current_token().native_token
        with self._lock:
            sem = self._slots.get(token)
            if sem is None:
                sem = anyio.Semaphore(self.config.workers)
                self._slots[token] = sem
            return sem

    async def _checkout(self) -> _Worker:
        while True:
            with self._lock:
                self._check_open()
                for pool in (self._idle, self._booting):
                    while pool and pool[0].proc.poll() is not None:  # died on its own (OOM killer...)
                        pool.pop(0).kill()  # closes its pipes
                        self._counts["restarts"] += 1
                    if pool:
                        self._busy += 1
                        return pool.pop(0)
                spawn = self._busy + self._spawning < self.config.workers
                if spawn:
                    self._busy += 1
            if spawn:
                try:
                    return _Worker(self.config.worker_memory_mb, self.config.worker_nice)
                except BaseException:
                    with self._lock:
                        self._busy -= 1
                    raise
            await anyio.sleep(0.01)  # a replacement is being spawned, or several loops share the pool

    def _checkin(self, worker: _Worker, clean: bool) -> None:
        with self._lock:
            self._busy -= 1
            if clean and not self._closed:
                self._idle.append(worker)
                return
            if not self._closed:
                self._counts["restarts"] += 1
            self._dead = [w for w in self._dead if not w.reap()]
            self._dead.append(worker)
        worker.kill()
        if not self._closed:  # the replacement is spawned off the event loop, boots while others grade
            threading.Thread(target=self._start_quietly, name="grader-respawn", daemon=True).start()

    def _start_quietly(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self.start()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Grader is closed")

    def _done(self, correct: bool, status: GradeStatus, t0: float, detail: str = "") -> GradeResult:
        key = {
            GradeStatus.FAST: "fast",
            GradeStatus.SYMBOLIC: "symbolic",
            GradeStatus.TIMEOUT: "timed_out",
            GradeStatus.ERROR: "errors",
            GradeStatus.TOO_LONG: "too_long",
        }[status]
        with self._lock:
            self._counts["graded"] += 1
            self._counts["correct"] += int(correct)
            self._counts[key] += 1
        return GradeResult(correct=correct, status=status, seconds=time.perf_counter() - t0, detail=detail)


_live: weakref.WeakSet[Grader] = weakref.WeakSet()
_default: Grader | None = None
_default_lock = threading.Lock()


def default_grader() -> Grader:
    """The process-wide grader (created on first use with the default configuration)."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = Grader()
        return _default


@atexit.register
def _close_all() -> None:
    for grader in list(_live):
        grader.close()


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    for grader in list(_live):
        grader._reset()


os.register_at_fork(after_in_child=_after_fork_in_child)
