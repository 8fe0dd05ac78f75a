"""Run untrusted Python code in a sandboxed worker process, without blocking the event loop.

:class:`Sandbox` answers ``await sandbox.run(code)`` with a :class:`RunResult`: the merged
stdout/stderr (at most ``output_bytes``), a :class:`RunStatus` and a one-line ``detail``. Every
run is a fresh ``python -I -S`` process (no site-packages, no environment variables, no user
directory) in a fresh temporary working folder, removed afterwards. Limits
(:class:`SandboxLimits`): wall-clock time (the parent kills the process group), CPU time,
address space, file size, disk and inodes of the working folder, processes, open files, output
bytes (more and the run is killed). A run that overruns or breaks a rule ends with a status
other than ``OK``: the tool call failed.

Isolation (:class:`Isolation`; ``auto`` picks the strongest that works on this machine, probed
once per process and reported by :meth:`Sandbox.isolation`; ``Isolation.<mode>.guarantees`` and
``.limitations`` say what each holds and does not; docs/code_sandbox.md has the full account):

- ``namespaces`` (root, or CAP_SYS_ADMIN): new mount, PID, network, IPC and UTS namespaces; the
  code sees a read-only system and Python, a few device nodes and its own size-limited tmpfs
  ``/sandbox``, runs as an unprivileged user id of its own (one per concurrent run, so
  ``RLIMIT_NPROC`` bounds its processes), has no network interface up, and every process it starts
  dies with it (it is PID 1 of its namespace);
- ``userns`` (no root, where unprivileged user namespaces are on): the same jail inside a user
  namespace of the caller's own, every capability dropped: what ``auto`` picks for a user
  without root;
- ``landlock`` (the fallback, Linux >= 5.13; ``auto`` warns once per process when it ends here):
  Landlock confines the file system to reading the Python and system directories and using the
  working folder; seccomp refuses sockets (but a unix pair), new processes, any action on another
  process (the runner's own pid is built into the filter), metadata changes, System V IPC and
  memory-backed files; every capability is dropped;
- ``rlimits``: resource limits and the audit hook only; not a security boundary, used only when
  asked for by name.

Every strong mode also installs a seccomp filter, sets ``PR_SET_NO_NEW_PRIVS``, and adds a Python
audit hook that stops the run on opening files outside the folder, sockets, ctypes and signals:
an extra line of defence that the code can switch off, never what the status depends on. The
status is the supervisor's and the parent's own observation (how the runner ended, timers,
output count, the set-up report sent before the code ran), never an exit status or text the code
chose. The sandbox's own script is ``_sandbox_child.py`` (standard library only). The working
folder is removed by :func:`remove_folder`, which no link, depth or file mode can steer.

This process never forks or execs for a run: one spawner process (``_sandbox_spawner.py``,
started once, on the first run) starts every run's process, so that no thread here holds the GIL
while a child waits to exec (which stalled the event loop on a loaded machine). The event loop
never waits on a process nor on the file system: the user id, the working folder, the request to
the spawner, the status and the clean-up run in the sandbox's own worker threads (started once,
off the loop); the output is read with
``anyio.wait_readable`` on a non-blocking pipe, and the spawner's answers (the process id, its
end) on a socket of the run's own.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import queue
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import chz

__all__ = [
    "Isolation",
    "RunResult",
    "RunStatus",
    "Sandbox",
    "SandboxConfig",
    "SandboxLimits",
    "SandboxStats",
    "SandboxUnavailable",
    "SandboxWarning",
    "remove_folder",
    "sandbox_for",
]

_T = TypeVar("_T")

_CHILD_SCRIPT = str(Path(__file__).with_name("_sandbox_child.py"))
_SPAWNER_SCRIPT = str(Path(__file__).with_name("_sandbox_spawner.py"))
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
_UID_BASE = 0x60000000
"""First user id of the unprivileged ids the ``namespaces`` mode runs code as (one per run)."""
_UID_COUNT = 4096


class Isolation(StrEnum):
    """How a :class:`Sandbox` confines the code (:attr:`guarantees` and :attr:`limitations` say
    what each mode holds and what it does not)."""

    AUTO = "auto"
    """The strongest mode that works here: ``namespaces`` (root), else ``userns``, else
    ``landlock`` (with a warning, once per process); never ``rlimits``."""
    NAMESPACES = "namespaces"
    """Mount/PID/network/IPC/UTS namespaces, an own unprivileged user id, seccomp (needs root)."""
    USERNS = "userns"
    """The same namespaces inside a user namespace of the caller's own (no root needed, where the
    kernel allows unprivileged user namespaces), every capability dropped, seccomp."""
    LANDLOCK = "landlock"
    """Landlock file-system and TCP rules, seccomp (no sockets, no new processes, no action on
    another process, no metadata change), no capabilities: the fallback without namespaces."""
    RLIMITS = "rlimits"
    """Resource limits and the audit hook only: not a security boundary."""

    @property
    def guarantees(self) -> str:
        """What the mode holds, in one paragraph."""
        return _GUARANTEES[self]

    @property
    def limitations(self) -> str:
        """What the mode does not hold, in one paragraph."""
        return _LIMITATIONS[self]


_NAMESPACE_GUARANTEES = (
    "the code sees only a read-only system and Python, five device nodes and its own tmpfs of disk_mb; "
    "no process outside its run (its own PID namespace, every process dies with it), no network "
    "(only a loopback that is down), its own System V IPC, no /proc, no capability; seccomp refuses "
    "namespace, mount, tracing, io_uring, bpf, keyring, memory-backed-file and System V IPC calls; "
    "memory at most max_processes x memory_mb of address space plus disk_mb of tmpfs (memory-backed "
    "files, System V and POSIX shared memory refused), plus the kernel buffers of its at most 64 "
    "descriptors a process (pipes kept at their default size); as root, a memory cgroup at that bound"
)
_GUARANTEES: dict[Isolation, str] = {
    Isolation.AUTO: "see the mode it resolves to",
    Isolation.NAMESPACES: _NAMESPACE_GUARANTEES + "; runs as a user id of its own (one per concurrent run)",
    Isolation.USERNS: _NAMESPACE_GUARANTEES
    + "; inside a user namespace where only the caller's user id is mapped, with no capability",
    Isolation.LANDLOCK: (
        "files: reads only the system and Python folders, reads and writes only its working folder "
        "(Landlock); no socket but a unix socket pair, no new process, signals and process-control "
        "calls (rlimits, priority, affinity, scheduling, I/O priority) only on itself, no fd owner "
        "(no I/O signals to another process), no tracing, "
        "no change of any file's mode, owner, times or extended attributes, no System V IPC, no "
        "memory-backed files, no growing a pipe's buffer, no capability (seccomp); memory at most "
        "memory_mb of address space, plus its folder's disk_mb where tmp_dir is a memory file system, "
        "plus the kernel buffers of its at most 64 descriptors; as root, a memory cgroup at that bound"
    ),
    Isolation.RLIMITS: "resource limits (time, address space, file size, open files) only",
}
_LIMITATIONS: dict[Isolation, str] = {
    Isolation.AUTO: "see the mode it resolves to",
    Isolation.NAMESPACES: "shares the host kernel (a kernel bug is an escape); needs root",
    Isolation.USERNS: (
        "shares the host kernel, and unprivileged user namespaces widen the kernel surface it reaches "
        "(a kernel bug is an escape); runs as the caller's user id as seen from outside; without "
        "root no memory cgroup, so kernel objects it makes within its descriptors (socket buffers, "
        "file locks, timers) are not bounded by the sandbox"
    ),
    Isolation.LANDLOCK: (
        "runs as the caller's user id in the host's namespaces: it can stat any path whose folders "
        "it may search (existence, size, mode, owner, times) and so learn which process ids exist "
        "(stat of /proc/<pid>), seccomp cannot see paths and Landlock has no right for it; the "
        "working folder is on the host's disk, its size (disk_mb, inodes) measured by the supervisor "
        "every 0.1 s, so a fast writer may overshoot by what it writes in that time before it is "
        "killed; it may not chmod or utime even its own files, nor make a folder without u+rwx; "
        "without root no memory cgroup, so kernel objects it makes within its descriptors (socket "
        "buffers, file locks, timers) are not bounded by the sandbox; shares the host kernel"
    ),
    Isolation.RLIMITS: "not a security boundary: the code can read, write and reach what the caller can",
}


class RunStatus(StrEnum):
    """How a run ended."""

    OK = "ok"
    """The runner exited with status 0 after the sandbox was set up (the code's own word: a
    program may exit 0 whatever it did, as any program may)."""
    ERROR = "error"
    """Another exit status (an exception, ``MemoryError`` included, ``sys.exit(n)``, a file-size
    limit). The exit status is only reported: no value maps to another status."""
    TIMEOUT = "timeout"
    """The wall-clock or CPU limit ran out; the process was killed (a CPU-limit signal counts
    only when the CPU time was spent: the code may send itself ``SIGXCPU``)."""
    MEMORY = "memory"
    """The kernel killed a process of the run at the run's memory bound, counted in the run's
    memory cgroup (only where one is made: root, with a memory controller to spare). An uncaught
    ``MemoryError`` is the code's own exit (``ERROR``), which the code could also fake."""
    OUTPUT_LIMIT = "output_limit"
    """More output than ``output_bytes``; the process was killed."""
    VIOLATION = "violation"
    """Killed by ``SIGSYS``: the seccomp filter stopped the run (its tripwire, which the audit
    hook pulls on a forbidden operation, or a call from the wrong architecture); in no mode can the
    code send ``SIGSYS`` itself."""
    KILLED = "killed"
    """Killed by another signal (a crash...)."""
    SANDBOX_ERROR = "sandbox_error"
    """The sandbox itself failed (could not start, or build the jail before the code ran, as its
    own report said on a pipe the code never holds): not the code's fault."""


@chz.chz
class SandboxLimits:
    """Bounds of one run (chz: nested command-line keys ``env.sandbox.limits.timeout_s=2``)."""

    timeout_s: float = 5.0
    """Time limit: the run is killed (``TIMEOUT``) once it has been going this long not counting
    the time its process waited for a CPU, so a busy machine slows a run (which is scheduled
    below the trainer) but does not cut it short; at ``5 * timeout_s + 5`` s of wall-clock time
    in any case. Also the CPU-time limit (rounded up to whole seconds)."""
    memory_mb: int = 512
    """Address-space limit of each process (``RLIMIT_AS``)."""
    output_bytes: int = 16_384
    """Output kept; producing more kills the run (``OUTPUT_LIMIT``)."""
    file_mb: int = 16
    """Largest file the code may write (``RLIMIT_FSIZE``)."""
    disk_mb: int = 32
    """Size of the working folder (``namespaces`` and ``userns`` modes: a tmpfs of this size;
    ``landlock``: measured by the supervisor every 0.1 s, the run killed when over)."""
    inodes: int = 2048
    """Files and folders the working folder may hold (enforced like ``disk_mb``)."""
    max_processes: int = 4
    """Processes and threads of a run (``namespaces`` and ``userns`` modes; ``landlock`` allows no
    new process). The memory of a run is bounded by ``max_processes * memory_mb + disk_mb``."""
    max_code_bytes: int = 32_768
    """Longest code accepted (UTF-8 bytes); longer code is an ``ERROR`` without running."""

    @chz.validate
    def _check(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        for name in ("memory_mb", "output_bytes", "file_mb", "disk_mb", "inodes", "max_processes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 1 <= self.max_code_bytes <= 60_000:
            raise ValueError(
                f"max_code_bytes must be in [1, 60000] (one pipe buffer), got {self.max_code_bytes}"
            )


@chz.chz
class SandboxConfig:
    """Configuration of a :class:`Sandbox` (chz, hashable: one shared sandbox per configuration)."""

    limits: SandboxLimits = chz.field(default_factory=SandboxLimits)
    """Bounds of each run."""
    isolation: Isolation = chz.field(default=Isolation.AUTO, munger=lambda _, value: Isolation(value))
    """How to confine the code (``auto``, ``namespaces``, ``userns``, ``landlock``, ``rlimits``)."""
    concurrency: int = 2
    """Runs at once per event loop (the rest queue)."""
    audit_hook: bool = True
    """Install the Python audit hook (an extra layer; the kernel's limits apply either way)."""
    seccomp: bool = True
    """Install the seccomp filter (``namespaces`` and ``landlock``; off only to test the other layers)."""
    nice: int = 10
    """How far below this process the runs are scheduled, so that its event loop wins the CPU over
    the code: a run's nice value is this process's + ``nice`` (at most 19), from the start of its
    process on, and the code cannot lower it (0..19; 0: this priority). Under ``sched_autogroup``
    all runs share one session, whose autogroup has this process's autogroup nice."""
    tmp_dir: str | None = None
    """Where the working folders are created (None: the system's temporary folder)."""

    @chz.validate
    def _check(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if not 0 <= self.nice <= 19:
            raise ValueError(f"nice must be in [0, 19], got {self.nice}")


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run."""

    status: RunStatus
    """How it ended."""
    output: str
    """Merged stdout and stderr (UTF-8, undecodable bytes replaced), at most ``output_bytes``."""
    detail: str
    """One line: ``exit status 1``, ``time limit of 5 s exceeded (killed)``..."""
    exit_code: int | None = None
    """The exit status, when the process exited."""
    signal: int | None = None
    """The signal that ended the process, when one did."""
    seconds: float = 0.0
    """Wall time of the run, queueing excluded."""
    cpu_s: float = 0.0
    """CPU time of the code's process."""
    truncated: bool = False
    """Whether output was cut at ``output_bytes``."""
    uid: int | None = None
    """The user id the code ran as (``namespaces`` mode), for audits: no process of it outlives the run."""
    workdir: str | None = None
    """The run's host folder (removed before :meth:`Sandbox.run` returns), for audits."""

    @property
    def ok(self) -> bool:
        """Whether the code ran to an exit status of 0."""
        return self.status is RunStatus.OK


@dataclass(frozen=True)
class SandboxStats:
    """Counters of a :class:`Sandbox` since it was created."""

    runs: int = 0
    """Runs finished (every status)."""
    ok: int = 0
    """Of which ``OK``."""
    timeouts: int = 0
    """``TIMEOUT``."""
    output_limits: int = 0
    """``OUTPUT_LIMIT``."""
    violations: int = 0
    """``VIOLATION``."""
    memory: int = 0
    """``MEMORY``."""
    sandbox_errors: int = 0
    """``SANDBOX_ERROR``."""
    lingering: int = 0
    """Runs after which the output pipe stayed open for a second after the process ended
    (a process outlived the run; ``rlimits`` mode only, the other modes kill them all)."""


class SandboxUnavailable(RuntimeError):
    """No requested isolation works on this machine (the message says why, per mode)."""


# --- probing -------------------------------------------------------------------------------------
_probe_lock = threading.Lock()
_probes: dict[Isolation, str | None] = {}
"""Per mode: None when it works here, else why not (process-wide: a property of the machine)."""


def _read_paths() -> list[str]:
    """The folders the code may read: the system's and the Python installation's."""
    paths = [p for p in _SYSTEM_DIRS if os.path.lexists(p)]
    for prefix in {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}:
        if not any(prefix == p or prefix.startswith(p + "/") for p in paths if not os.path.islink(p)):
            paths.append(prefix)
    return paths


def _uid_range_mapped(first: int, count: int) -> bool:
    try:
        with open("/proc/self/uid_map") as f:
            for line in f:
                inside, _outside, length = (int(x) for x in line.split())
                if inside <= first and first + count <= inside + length:
                    return True
    except (OSError, ValueError):
        return False
    return False


def _static_problem(mode: Isolation) -> str | None:
    """Why ``mode`` cannot work here, known without starting a process (None: try it)."""
    if not sys.platform.startswith("linux"):
        return f"needs Linux, not {sys.platform}"
    if mode is Isolation.USERNS:
        return _userns_problem()
    if mode is Isolation.NAMESPACES:
        if os.geteuid() != 0:
            return "needs root (mount and network namespaces, a user id per run)"
        if not _uid_range_mapped(_UID_BASE, _UID_COUNT):
            return f"user ids {_UID_BASE}..{_UID_BASE + _UID_COUNT - 1} are not mapped in this user namespace"
    return None


def _userns_problem() -> str | None:
    """Why unprivileged user namespaces are off here, from the kernel's settings (None: try)."""
    settings = (
        ("/proc/sys/user/max_user_namespaces", "0", "user.max_user_namespaces is 0"),
        ("/proc/sys/kernel/unprivileged_userns_clone", "0", "kernel.unprivileged_userns_clone is 0"),
    )
    for path, off, why in settings:
        try:
            with open(path) as f:
                if f.read().strip() == off:
                    return why
        except OSError:
            continue
    return None


_warned = threading.Event()


def _warn_weaker_mode(reasons: str) -> None:
    """Once per process: ``auto`` fell back to ``landlock``, which holds less than namespaces."""
    if _warned.is_set():
        return
    _warned.set()
    warnings.warn(
        f"the code sandbox runs in landlock mode, the fallback without namespaces ({reasons}); it does "
        f"not hold: {Isolation.LANDLOCK.limitations}",
        SandboxWarning,
        stacklevel=3,
    )


class SandboxWarning(UserWarning):
    """The sandbox runs in a weaker mode than it could elsewhere (see :class:`Isolation`)."""


# --- user ids ------------------------------------------------------------------------------------
class _UidPool:
    """Unprivileged user ids, one per concurrent run, reserved across processes with ``flock``
    and handed out round-robin over the whole range (from a per-process offset): a user id comes
    back only after thousands of other runs, so a process a run might leave behind never shares
    its id (nor its ``RLIMIT_NPROC`` budget) with a fresh run, and processes are told apart by
    their run's id (``envs.code.escapes.leftover_processes``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = (os.getpid() * 7919) % _UID_COUNT

    def acquire(self) -> tuple[int, int]:
        with self._lock:
            folder = Path(tempfile.gettempdir()) / "turngym-sandbox-uids"
            folder.mkdir(mode=0o700, exist_ok=True)
            for _ in range(_UID_COUNT):
                k, self._next = self._next, (self._next + 1) % _UID_COUNT
                fd = os.open(folder / f"{_UID_BASE + k}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    continue
                return _UID_BASE + k, fd
        raise RuntimeError(f"no free sandbox user id ({_UID_COUNT} in use)")

    def release(self, slot: tuple[int, int]) -> None:
        with contextlib.suppress(OSError):
            os.close(slot[1])  # drops the flock


_uids = _UidPool()


def _forget_uids_in_child() -> None:
    global _uids
    _uids = _UidPool()  # the parent's reservations are the parent's (their fds close on exec)


os.register_at_fork(after_in_child=_forget_uids_in_child)


# --- the sandbox ---------------------------------------------------------------------------------
class Sandbox:
    """Runs Python code in sandboxed worker processes; see the module docstring.

    Args:
        config: limits, isolation and concurrency (defaults: 5 s, 512 MB, 16 KiB of output,
            ``auto`` isolation, 2 runs at once).

    Safe to share between coroutines and event loops; pickles as its configuration.
    """

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(SandboxStats.__dataclass_fields__, 0)
        self._slots: weakref.WeakKeyDictionary[Any, anyio.Semaphore] = weakref.WeakKeyDictionary()
        self._mode: Isolation | None = None
        self._read_paths = _read_paths()
        self._python = os.path.realpath(sys.executable)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Sandbox, (self.config,))

    @property
    def stats(self) -> SandboxStats:
        """A snapshot of the counters."""
        with self._lock:
            return SandboxStats(**self._counts)

    # --- isolation -------------------------------------------------------------------------
    async def isolation(self) -> Isolation:
        """The mode runs use (resolving ``auto`` probes the machine once per process); its
        :attr:`~Isolation.guarantees` and :attr:`~Isolation.limitations` say what it holds and what
        it does not. ``auto`` warns (:class:`SandboxWarning`, once per process) when it falls back
        to ``landlock``.

        Raises:
            SandboxUnavailable: the requested mode (or, for ``auto``, every strong mode) does not
                work here; the message gives each mode's reason.
        """
        if self._mode is not None:
            return self._mode
        wanted = self.config.isolation
        candidates = [wanted]
        if wanted is Isolation.AUTO:
            candidates = [Isolation.NAMESPACES, Isolation.USERNS, Isolation.LANDLOCK]
        reasons: list[str] = []
        for mode in candidates:
            problem = await self._probe(mode)
            if problem is None:
                if wanted is Isolation.AUTO and mode is Isolation.LANDLOCK:
                    _warn_weaker_mode("; ".join(reasons))
                self._mode = mode
                return mode
            reasons.append(f"{mode}: {problem}")
        hint = (
            ""
            if wanted is Isolation.RLIMITS
            else "; isolation='rlimits' runs with resource limits only (unsafe)"
        )
        raise SandboxUnavailable(f"no sandbox isolation works here ({'; '.join(reasons)}){hint}")

    async def _probe(self, mode: Isolation) -> str | None:
        with _probe_lock:
            if mode in _probes:
                return _probes[mode]
        problem = _static_problem(mode)
        if problem is None:  # a default-limits sandbox: this one's limits may be too tight to start
            probe = Sandbox(SandboxConfig(isolation=mode, tmp_dir=self.config.tmp_dir))
            result = await probe._run_as(mode, "print(6 * 7)")
            if result.status is not RunStatus.OK or result.output != "42\n":
                problem = (
                    f"a test run failed ({result.status}: {result.detail}; {result.output.strip()[-200:]!r})"
                )
        with _probe_lock:
            _probes.setdefault(mode, problem)
            return _probes[mode]

    # --- running ---------------------------------------------------------------------------
    async def run(self, code: str) -> RunResult:
        """Run ``code`` as a fresh ``__main__`` in the sandbox. Never raises for anything the
        code does; raises :class:`SandboxUnavailable` when no isolation works here."""
        mode = await self.isolation()
        async with self._slot():
            result = await self._run_as(mode, code)
        self._count(result)
        return result

    def _slot(self) -> anyio.Semaphore:
        token = anyio.lowlevel.current_token().native_token
        with self._lock:
            sem = self._slots.get(token)
            if sem is None:
                sem = anyio.Semaphore(self.config.concurrency)
                self._slots[token] = sem
            return sem

    def _count(self, result: RunResult) -> None:
        key = {
            RunStatus.OK: "ok",
            RunStatus.TIMEOUT: "timeouts",
            RunStatus.OUTPUT_LIMIT: "output_limits",
            RunStatus.VIOLATION: "violations",
            RunStatus.MEMORY: "memory",
            RunStatus.SANDBOX_ERROR: "sandbox_errors",
        }.get(result.status)
        with self._lock:
            self._counts["runs"] += 1
            if key:
                self._counts[key] += 1

    async def _run_as(self, mode: Isolation, code: str) -> RunResult:
        limits = self.config.limits
        data = code.encode("utf-8", "replace")
        if len(data) > limits.max_code_bytes:
            return RunResult(RunStatus.ERROR, "", f"code longer than {limits.max_code_bytes} bytes; not run")
        return await _Run(self, mode, data).execute()

    def child_config(self, mode: Isolation, workdir: str, uid: int | None, status_fd: int) -> dict[str, Any]:
        """The JSON configuration ``_sandbox_child.py`` receives for one run."""
        limits = self.config.limits
        # absolute: this process's nice (its main thread's) + ``nice``; the spawner sets it before
        # the run's process execs
        nice = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + self.config.nice)
        return {
            "mode": str(mode),
            "workdir": workdir,
            "uid": uid,
            "gid": uid,
            "cpu_s": limits.timeout_s,
            "memory_mb": limits.memory_mb,
            "file_mb": limits.file_mb,
            "disk_mb": limits.disk_mb,
            "inodes": limits.inodes,
            "max_processes": limits.max_processes,
            "read_paths": self._read_paths,
            "timeout_s": limits.timeout_s,
            "wall_cap_s": _wall_cap_s(limits),
            "status_fd": status_fd,
            "audit_hook": self.config.audit_hook,
            "seccomp": self.config.seccomp and mode is not Isolation.RLIMITS,
            "nice": nice,
            "cgroup": None,  # the run's memory cgroup, filled in per run
        }


def _wall_cap_s(limits: SandboxLimits) -> float:
    """The most wall-clock time a run may take (``timeout_s`` does not count waits for a CPU)."""
    return 5.0 * limits.timeout_s + 5.0


def _memory_bound_mb(limits: SandboxLimits, mode: Isolation) -> int:
    """The host memory a run may hold, as stated (``landlock`` runs one process)."""
    processes = 1 if mode is Isolation.LANDLOCK else limits.max_processes
    return processes * limits.memory_mb + limits.disk_mb


class _MemoryCgroups:
    """A memory cgroup per run, below this process's own, where one can be made (root, with the
    memory controller of cgroup v1, or of v2 enabled for children of this process's cgroup).

    Its limit is the run's stated bound (:func:`_memory_bound_mb`); the kernel
    counts everything the run's processes make it hold there: address space in use, its tmpfs,
    and kernel memory (pipe and socket buffers, file locks, page tables...). When the limit is
    reached the kernel kills a process of the run, which the run's status says (``MEMORY``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._base: tuple[str, int] | None = None
        self._known = False
        self._pending: list[str] = []

    def base(self) -> tuple[str, int] | None:
        """(this process's memory cgroup folder, cgroup version), or None where runs get none."""
        with self._lock:
            if not self._known:
                self._base = self._find() if os.geteuid() == 0 else None
                self._known = True
            return self._base

    def _find(self) -> tuple[str, int] | None:
        try:
            with open("/proc/self/cgroup") as f:
                lines = [line.rstrip("\n").split(":", 2) for line in f]
            with open("/proc/self/mountinfo") as f:
                mounts = [line.split() for line in f]
        except OSError:
            return None
        for version in (1, 2):
            for hierarchy, controllers, path in lines:
                if version == 1 and "memory" not in controllers.split(","):
                    continue
                if version == 2 and (hierarchy != "0" or controllers):
                    continue
                for m in mounts:
                    fstype = m[m.index("-") + 1] if "-" in m else ""
                    options = m[-1].split(",")
                    if (version == 1 and fstype == "cgroup" and "memory" in options) or (
                        version == 2 and fstype == "cgroup2"
                    ):
                        root, point = m[3], m[4]
                        if root != "/" and not (path == root or path.startswith(root + "/")):
                            continue
                        folder = point + path[len(root) :] if root != "/" else point + path
                        if self._usable(folder.rstrip("/") or "/", version):
                            return folder.rstrip("/") or "/", version
        return None

    def _usable(self, folder: str, version: int) -> bool:
        if version == 2:
            try:
                with open(f"{folder}/cgroup.subtree_control") as f:
                    if "memory" not in f.read().split():
                        return False
            except OSError:
                return False
        probe = f"{folder}/turngym-probe-{os.getpid()}"
        try:
            os.mkdir(probe)
        except OSError:
            return False
        try:
            self._limit(probe, version, 64 << 20)
            return True
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(probe)

    @staticmethod
    def _limit(folder: str, version: int, limit: int) -> None:
        if version == 1:
            with open(f"{folder}/memory.limit_in_bytes", "w") as f:
                f.write(str(limit))
            with contextlib.suppress(OSError), open(f"{folder}/memory.memsw.limit_in_bytes", "w") as f:
                f.write(str(limit))  # no swap beyond it either
        else:
            with open(f"{folder}/memory.max", "w") as f:
                f.write(str(limit))
            with contextlib.suppress(OSError), open(f"{folder}/memory.swap.max", "w") as f:
                f.write("0")

    def create(self, name: str, limit: int) -> str | None:
        """A fresh cgroup limited to ``limit`` bytes (its folder), or None where runs get none."""
        base = self.base()
        if base is None:
            return None
        folder = f"{base[0]}/turngym-{name}"
        os.mkdir(folder)
        try:
            self._limit(folder, base[1], limit)
        except OSError:
            os.rmdir(folder)
            raise
        return folder

    def oom_kills(self, folder: str) -> int:
        """How many processes the kernel killed in ``folder`` for want of memory."""
        base = self.base()
        name = "memory.oom_control" if base is None or base[1] == 1 else "memory.events"
        try:
            with open(f"{folder}/{name}") as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self, folder: str) -> None:
        """Remove ``folder`` (empty once the run's processes ended), and those left before. A
        cgroup still busy after a second (a killed run's last process not yet reaped by its new
        parent) is left for later: removed at a later run, or when this process exits."""
        with self._lock:
            folders, self._pending = [*self._pending, folder], []
        for i, each in enumerate(folders):
            for _ in range(50 if i == len(folders) - 1 else 1):
                try:
                    os.rmdir(each)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                with self._lock:
                    self._pending.append(each)

    def remove_pending(self) -> None:
        """At exit: one last try for the cgroups left for later."""
        with self._lock:
            folders, self._pending = self._pending, []
        for folder in folders:
            with contextlib.suppress(OSError):
                os.rmdir(folder)


_cgroups = _MemoryCgroups()
atexit.register(_cgroups.remove_pending)


class _StartError(Exception):
    """The run could not start (no user id, no folder, no process); the message says why."""


class _Spawner:
    """The process that starts every run (``_sandbox_spawner.py``; its docstring has the protocol).

    Started once per process, on the first run, from a worker thread (and again only if it died):
    after that this process never forks or execs for a run. Creating a process from a thread
    holds this process's GIL until the child has exec'd, which on a loaded machine stalls the
    event loop for as long as the child waits for a CPU; the spawner waits instead. It ends when
    this process does (its control socket closes), killing whatever runs are left.

    ``session_per_run=True`` asks for each run in a session (an autogroup) of its own, as before
    the runs shared the spawner's (kept for the bench's before/after figures).
    """

    def __init__(self, *, session_per_run: bool = False) -> None:
        self.session_per_run = session_per_run
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None

    def request(self, argv: list[str], config: dict[str, Any], fds: tuple[int, int, int]) -> socket.socket:
        """In a worker thread: ask for one run of ``argv`` with ``config`` and the run's stdin,
        output and status pipes (``fds``); the run's channel, on which the answers come."""
        message: dict[str, Any] = {"argv": argv, "config": config}
        if self.session_per_run:
            message["session"] = True
        data = json.dumps(message).encode()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            for attempt in range(2):  # a spawner that died is started again, once
                control = self._ensure()
                try:
                    socket.send_fds(control, [data], [theirs.fileno(), *fds])
                    break
                except (BrokenPipeError, ConnectionError):
                    self._forget(control)
                    if attempt:
                        raise
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return ours

    def pid(self) -> int | None:
        """The spawner's process id, once started (for audits: a run must not act on it)."""
        proc = self._proc
        return None if proc is None else proc.pid

    def started_pid(self) -> int:
        """The spawner's process id, starting it first if need be (in a worker thread)."""
        self._ensure()
        pid = self.pid()
        assert pid is not None
        return pid

    def _alive(self) -> bool:
        proc = self._proc
        return proc is not None and proc.poll() is None

    def _ensure(self) -> socket.socket:
        with self._lock:
            if self._control is not None and self._alive():
                return self._control
            parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                argv = [os.path.realpath(sys.executable), "-I", "-S", "-B", _SPAWNER_SCRIPT]
                argv.append(str(child.fileno()))
                own = _autogroup_nice()
                if own is not None:  # the runs' autogroup weighs as this process's
                    argv.append(str(own))
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    pass_fds=(child.fileno(),),
                    close_fds=True,
                    # a terminal's Ctrl-C is this process's to handle; and, under sched_autogroup,
                    # one autogroup for every run (_sandbox_spawner.join_autogroup_nice)
                    start_new_session=True,
                    cwd="/",
                    env={},
                )
            except BaseException:
                parent.close()
                raise
            finally:
                child.close()
            self._proc, self._control = proc, parent
            return parent

    def close(self) -> None:
        """End the spawner (it kills whatever runs are left) and wait for it (5 s at most)."""
        with self._lock:
            if self._control is not None:
                self._control.close()
                self._control = None
            proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5.0)

    def _forget(self, control: socket.socket) -> None:
        with self._lock:
            if self._control is control:
                control.close()
                self._control = None

    def _after_fork(self) -> None:
        """In a forked child: the parent's spawner is the parent's (its socket is closed here, so
        the spawner still sees the parent's end as the only one)."""
        self._lock = threading.Lock()
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
        self._control = None
        self._proc = None


_spawner = _Spawner()
os.register_at_fork(after_in_child=_spawner._after_fork)


class _Workers:
    """The sandbox's own worker threads, started once and off the event loop.

    ``anyio.to_thread`` starts a new thread from the event loop's thread when none is idle, and
    ``Thread.start`` waits there until the new thread runs: on a loaded machine a burst of runs
    stalled the loop that way too. These threads are started by the first call, from an anyio
    worker thread; every later call only queues a job and awaits its end.
    """

    def __init__(self, count: int = 16) -> None:
        self.count = count
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def _start(self) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            while len(self._threads) < self.count:
                thread = threading.Thread(target=self._serve, daemon=True, name="turngym-sandbox-worker")
                thread.start()
                self._threads.append(thread)

    def _serve(self) -> None:
        while True:
            self._jobs.get()()

    async def run(self, func: Callable[..., _T], *args: Any) -> _T:
        """``func(*args)`` in a worker thread; like ``anyio.to_thread.run_sync``, a cancelled
        caller still waits for it to end."""
        if len(self._threads) < self.count:  # the first call (or after a fork): start them
            return await anyio.to_thread.run_sync(lambda: (self._start(), func(*args))[1])
        token = anyio.lowlevel.current_token()
        done = anyio.Event()
        outcome: list[tuple[bool, Any]] = []

        def job() -> None:
            try:
                outcome.append((True, func(*args)))
            except BaseException as e:  # handed to the caller
                outcome.append((False, e))
            with contextlib.suppress(RuntimeError):  # the caller's loop ended
                anyio.from_thread.run_sync(done.set, token=token)

        self._jobs.put(job)
        with anyio.CancelScope(shield=True):
            await done.wait()
        await anyio.lowlevel.checkpoint()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._jobs = queue.SimpleQueue()
        self._threads = []


_workers = _Workers()
os.register_at_fork(after_in_child=_workers._after_fork)


_ANSWER_S = 120.0
"""How long a run waits for each answer of the spawner (its process id, then its end) beyond the
run's own limits, which the supervisor enforces; generous, as a loaded machine starts processes
slowly."""


class _Process:
    """A run's process as seen through its channel to the spawner: started, ended, killed."""

    def __init__(self, channel: socket.socket):
        self.channel = channel
        channel.setblocking(False)
        self.pid: int | None = None
        self.ended = False

    async def _message(self) -> dict[str, Any]:
        """The next answer; ``{}`` when the spawner is gone."""
        while True:
            await anyio.wait_readable(self.channel)
            try:
                data = self.channel.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                return {}
            if not data:
                return {}
            try:
                answer = json.loads(data)
            except ValueError:
                return {}
            return answer if isinstance(answer, dict) else {}

    async def _answer(self, seconds: float = _ANSWER_S) -> dict[str, Any]:
        """The next answer, ``{}`` after ``seconds`` without one: a lost answer must cost a run,
        never hang the rollout that waits for it."""
        with anyio.move_on_after(seconds):
            return await self._message()
        return {}

    async def started(self) -> None:
        """Wait for the process id (raises :class:`_StartError` with the spawner's reason)."""
        answer = await self._answer()
        if "pid" not in answer:
            why = answer.get("error", "the spawner ended")
            raise _StartError(f"could not start the sandbox: {why}")
        self.pid = int(answer["pid"])

    async def wait(self, limit_s: float) -> None:
        """Wait until the process has ended (the spawner keeps it unreaped until :meth:`release`);
        ``limit_s``: the run's own time limit, which the supervisor enforces."""
        if self.ended:
            return
        answer = await self._answer(limit_s + _ANSWER_S)
        if not answer.get("exited"):  # the spawner died or went silent: nobody holds the process
            self.kill()
        self.ended = True

    def kill(self) -> None:
        """``SIGKILL`` to the process group (safe until :meth:`release`: the id cannot be reused)."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def release(self) -> None:
        """Done with the run: the spawner kills what is left of its group and reaps it."""
        self.channel.close()


class _Run:
    """One run: start, read, kill when needed, reap, clean up.

    Only waiting happens on the event loop; the file-system and process work (user id, folder,
    pipes, the request to the spawner, status, clean-up) runs in worker threads (:meth:`_start`,
    :meth:`_finish`); the process is created by the spawner, never here.
    """

    def __init__(self, sandbox: Sandbox, mode: Isolation, code: bytes):
        self.sandbox = sandbox
        self.limits = sandbox.config.limits
        self.mode = mode
        self.code = code
        self.uid_slot: tuple[int, int] | None = None
        self.workdir: str | None = None
        self.output = bytearray()
        self.killed_for: RunStatus | None = None
        self.lingering = False
        self.cleanup_problem: str | None = None
        self.cgroup: str | None = None
        self.oom_kills = 0

    @property
    def uid(self) -> int | None:
        return self.uid_slot[0] if self.uid_slot else None

    async def execute(self) -> RunResult:
        t0 = time.perf_counter()
        try:
            channel, out_fd, status_fd = await _workers.run(self._start)
        except _StartError as e:
            return RunResult(RunStatus.SANDBOX_ERROR, "", str(e))
        proc = _Process(channel)
        reports: list[dict[str, Any]] = []
        start_error: str | None = None
        try:
            await proc.started()
            await self._read(proc, out_fd)
            await proc.wait(_wall_cap_s(self.limits))
            await self._drain(out_fd)
        except _StartError as e:
            start_error = str(e)
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled run is still killed and cleaned up
                if proc.pid is None and start_error is None:  # cancelled before the spawner answered
                    with anyio.move_on_after(30.0), contextlib.suppress(_StartError):
                        await proc.started()
                if proc.pid is not None and not proc.ended:  # not reaped: its group id is still its own
                    proc.kill()
                    await proc.wait(_wall_cap_s(self.limits))
                    await self._drain(out_fd)  # a runner in a group of its own dies with it (PDEATHSIG)
                reports = await _workers.run(self._finish, out_fd, status_fd)
                proc.release()
        if start_error is not None:
            return RunResult(RunStatus.SANDBOX_ERROR, "", start_error)
        if self.lingering:
            with self.sandbox._lock:
                self.sandbox._counts["lingering"] += 1
        return self._result(reports, time.perf_counter() - t0, self.workdir)

    def _start(self) -> tuple[socket.socket, int, int]:
        """In a worker thread: a user id (``namespaces``), the folder, the pipes, the request to
        the spawner. On failure everything taken is given back and :class:`_StartError` says why."""
        if self.mode is Isolation.NAMESPACES:
            try:
                self.uid_slot = _uids.acquire()
            except (OSError, RuntimeError) as e:
                raise _StartError(f"no sandbox user id: {e}") from None
        try:
            self.workdir = tempfile.mkdtemp(prefix="turngym-sandbox-", dir=self.sandbox.config.tmp_dir)
        except OSError as e:
            self._release()
            raise _StartError(f"no working folder: {e}") from None
        try:
            bound = _memory_bound_mb(self.limits, self.mode) << 20
            self.cgroup = _cgroups.create(os.path.basename(self.workdir), bound)
            return self._spawn(self.workdir)
        except OSError as e:
            self._remove()
            raise _StartError(f"could not start the sandbox: {e}") from None
        except BaseException:
            self._remove()
            raise

    def _finish(self, out_fd: int, status_fd: int) -> list[dict[str, Any]]:
        """In a worker thread: the status reports, then close, remove the folder, free the user id."""
        reports = _read_status(status_fd)
        for fd in (out_fd, status_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._remove()
        return reports

    def _remove(self) -> None:
        if self.workdir is not None:
            self.cleanup_problem = remove_folder(self.workdir)
        if self.cgroup is not None:
            self.oom_kills = _cgroups.oom_kills(self.cgroup)
            _cgroups.remove(self.cgroup)
        self._release()

    def _release(self) -> None:
        if self.uid_slot is not None:
            _uids.release(self.uid_slot)

    def _spawn(self, workdir: str) -> tuple[socket.socket, int, int]:
        """The pipes, the code written to stdin, and the request to the spawner (which starts the
        process: this one never forks); the run's channel, output and status pipes."""
        if self.mode is not Isolation.NAMESPACES and os.geteuid() == 0:
            os.chmod(workdir, 0o700)
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        try:
            os.write(in_w, self.code)  # fits the empty pipe's buffer (max_code_bytes <= 60000)
            os.close(in_w)
            config = self.sandbox.child_config(self.mode, workdir, self.uid, status_w)
            config["cgroup"] = self.cgroup
            argv = [self.sandbox._python, "-I", "-S", "-B", "-u", "-X", "utf8", _CHILD_SCRIPT]
            channel = _spawner.request(argv, config, (in_r, out_w, status_w))
        except BaseException:
            for fd in (out_r, status_r):
                os.close(fd)
            raise
        finally:
            for fd in (in_r, out_w, status_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
        os.set_blocking(out_r, False)
        os.set_blocking(status_r, False)
        return channel, out_r, status_r

    async def _read(self, proc: _Process, out_fd: int) -> None:
        """Collect output until every writer closed the pipe, the output cap or the time limit."""
        cap = self.limits.output_bytes
        # the supervisor ends the run at its time limit (waits for a CPU not counted); this is its
        # backstop
        with anyio.move_on_after(_wall_cap_s(self.limits) + 2.0) as scope:
            while True:
                await anyio.wait_readable(out_fd)
                try:
                    chunk = os.read(out_fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    return
                self.output += chunk
                if len(self.output) > cap:
                    self.killed_for = RunStatus.OUTPUT_LIMIT
                    break
        if scope.cancelled_caught:
            self.killed_for = RunStatus.TIMEOUT
        proc.kill()

    async def _drain(self, out_fd: int) -> None:
        """After the supervisor ended: wait (1 s at most) until nothing holds the output pipe, so
        no process of the run is left; keep nothing beyond the cap."""
        with anyio.move_on_after(1.0) as scope:
            while True:
                await anyio.wait_readable(out_fd)
                try:
                    chunk = os.read(out_fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    return
                if len(self.output) <= self.limits.output_bytes:
                    self.output += chunk
        if scope.cancelled_caught:
            self.lingering = True

    def _result(self, reports: list[dict[str, Any]], seconds: float, workdir: str | None) -> RunResult:
        limits = self.limits
        truncated = len(self.output) > limits.output_bytes
        text = bytes(self.output[: limits.output_bytes]).decode("utf-8", "replace")
        final = next((r for r in reversed(reports) if "exit" in r or "signal" in r), {})
        setup = next((r["setup_error"] for r in reports if "setup_error" in r), None)
        exit_code, sig = final.get("exit"), final.get("signal")
        common = {
            "exit_code": exit_code,
            "signal": sig,
            "seconds": seconds,
            "cpu_s": float(final.get("cpu_s", 0.0)),
            "uid": self.uid,
            "workdir": workdir,
        }

        def result(status: RunStatus, detail: str) -> RunResult:
            if self.cleanup_problem:
                detail = f"{detail}; clean-up: {self.cleanup_problem}"
            return RunResult(status, text, detail, truncated=truncated, **common)

        if self.killed_for is RunStatus.OUTPUT_LIMIT:
            return result(RunStatus.OUTPUT_LIMIT, f"output exceeded {limits.output_bytes} bytes (killed)")
        if self.killed_for is RunStatus.TIMEOUT or final.get("timeout"):
            return result(RunStatus.TIMEOUT, f"time limit of {limits.timeout_s:g} s exceeded (killed)")
        if self.oom_kills:  # the kernel's own count, in the run's memory cgroup
            bound = _memory_bound_mb(limits, self.mode)
            return result(RunStatus.MEMORY, f"memory limit of {bound} MB exceeded (killed)")
        if final.get("disk"):
            return result(
                RunStatus.ERROR,
                f"disk limit of {limits.disk_mb} MB or {limits.inodes} files exceeded (killed)",
            )
        # every other status is the supervisor's observation: what its setup reported before the
        # code ran (on a pipe closed before it), and how the runner ended (wait4), never text
        if setup is not None:
            return result(RunStatus.SANDBOX_ERROR, f"the sandbox could not start: {setup}")
        if not final:
            return result(RunStatus.SANDBOX_ERROR, "the sandbox ended without a report")
        if not any(r.get("ready") for r in reports):
            return result(RunStatus.SANDBOX_ERROR, "the sandbox ended before the code ran")
        if sig is not None:
            cpu_out = common["cpu_s"] >= 0.9 * limits.timeout_s
            if sig in (signal.SIGXCPU, signal.SIGKILL) and cpu_out:  # not a signal it sent itself
                return result(
                    RunStatus.TIMEOUT, f"CPU time limit of {limits.timeout_s:g} s exceeded (killed)"
                )
            if sig == signal.SIGXFSZ:
                return result(RunStatus.ERROR, f"file size limit of {limits.file_mb} MB exceeded (killed)")
            if sig == signal.SIGSYS:
                return result(RunStatus.VIOLATION, "stopped by the sandbox: a forbidden operation")
            return result(RunStatus.KILLED, f"killed by signal {_signal_name(sig)}")
        if exit_code == 0:
            return result(RunStatus.OK, "exit status 0")
        return result(RunStatus.ERROR, f"exit status {exit_code}")


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def _read_status(fd: int) -> list[dict[str, Any]]:
    data = b""
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(fd, 65536):
            data += chunk
    out: list[dict[str, Any]] = []
    for line in data.splitlines():
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _autogroup_nice(path: str = "/proc/self/autogroup") -> int | None:
    """This process's autogroup nice (``/proc/self/autogroup``); None where there is none, or where
    the file says nothing (some containers have it empty)."""
    try:
        with open(path) as f:
            return int(f.read().rsplit(None, 1)[-1])
    except (OSError, ValueError, IndexError):
        return None


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_folder(folder: str) -> str | None:
    """Remove ``folder`` and everything in it, whatever the code left there; None when it is gone,
    else one line saying what stayed and why.

    It cannot be steered out of the folder: every step is relative to a descriptor of a folder
    already opened without following links (``O_NOFOLLOW``), links are removed and never followed,
    a folder's mode is changed (to ``u+rwx``, so that it can be listed and emptied) only through a
    descriptor of that very folder, and going back up checks that the parent is the one it came
    from. No recursion and one open folder at a time: any depth, any file kind and mode.
    """
    parent, name = os.path.split(os.path.abspath(folder))
    try:  # the parent is the caller's (tmp_dir): trusted, links in it followed
        top = os.open(os.path.realpath(parent), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        return f"could not open {parent}: {e.strerror}"
    try:
        return _remove_below(top, name, folder)
    finally:
        os.close(top)


def _open_dir(parent_fd: int, name: str) -> int:
    """Open the folder ``name`` of ``parent_fd``, making it ``u+rwx`` first when it is not (it
    must be a folder, not a link: checked on a descriptor of the entry itself)."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        path_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
        try:
            if not stat.S_ISDIR(os.fstat(path_fd).st_mode):
                raise NotADirectoryError(name) from None
            try:
                os.chmod(f"/proc/self/fd/{path_fd}", 0o700)  # this inode, through its descriptor
            except FileNotFoundError:  # no /proc: the kernel's own no-follow chmod (glibc >= 2.32)
                os.chmod(name, 0o700, dir_fd=parent_fd, follow_symlinks=False)
        finally:
            os.close(path_fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    st = os.fstat(fd)
    if st.st_mode & 0o700 != 0o700:
        os.chmod(fd, 0o700)  # to list it and remove its entries
    return fd


def _remove_below(top: int, name: str, folder: str) -> str | None:
    try:
        st = os.stat(name, dir_fd=top, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"could not remove {folder}: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(name, dir_fd=top)
            return None
        except OSError as e:
            return f"could not remove {folder}: {e.strerror}"
    # a stack of the folders entered: (name in its parent, (device, inode) of the parent)
    path: list[tuple[str, tuple[int, int]]] = []
    top_st = os.fstat(top)
    try:
        fd = _open_dir(top, name)
    except OSError as e:
        return f"could not remove {folder}: {e.strerror}"
    path.append((name, (top_st.st_dev, top_st.st_ino)))
    problems: list[str] = []
    skip: set[tuple[int, int]] = set()  # folders that could not be emptied: not entered again
    try:
        while True:
            here = os.fstat(fd)
            descended = False
            with os.scandir(fd) as entries:
                listed = list(entries)
            for entry in listed:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        child = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                        if (child.st_dev, child.st_ino) in skip:
                            continue
                        sub = _open_dir(fd, entry.name)
                        os.close(fd)
                        fd = sub
                        path.append((entry.name, (here.st_dev, here.st_ino)))
                        descended = True
                        break
                    os.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    continue
                except OSError as e:
                    if len(problems) < 3:
                        problems.append(f"{entry.name!r}: {e.strerror}")
                    if entry.is_dir(follow_symlinks=False):
                        with contextlib.suppress(OSError):
                            child = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                            skip.add((child.st_dev, child.st_ino))
            if descended:
                continue
            # this folder is as empty as it gets: go up, check the parent, remove it
            entry_name, parent_id = path.pop()
            if not path:
                os.close(fd)
                fd = -1
                try:
                    os.rmdir(entry_name, dir_fd=top)
                except FileNotFoundError:
                    pass
                except OSError as e:
                    problems.append(f"the folder itself: {e.strerror}")
                break
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            up_st = os.fstat(fd)
            if (up_st.st_dev, up_st.st_ino) != parent_id:
                problems.append("a folder was moved during the clean-up; stopped")
                break
            try:
                os.rmdir(entry_name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError as e:
                with contextlib.suppress(OSError):
                    child = os.stat(entry_name, dir_fd=fd, follow_symlinks=False)
                    skip.add((child.st_dev, child.st_ino))
                if len(problems) < 3:
                    problems.append(f"{entry_name!r}: {e.strerror}")
    except OSError as e:
        problems.append(f"{getattr(e, 'filename', None) or ''} {e.strerror}".strip())
    finally:
        if fd >= 0:
            os.close(fd)
    if not problems and not os.path.lexists(folder):
        return None
    return f"could not remove {folder}: " + "; ".join(problems or ["it is still there"])


_shared: dict[SandboxConfig, Sandbox] = {}
_shared_lock = threading.Lock()


def sandbox_for(config: SandboxConfig | None = None) -> Sandbox:
    """The process-wide :class:`Sandbox` of ``config`` (default: the default configuration);
    one per distinct configuration, so that its concurrency bound holds across every user."""
    config = config or SandboxConfig()
    with _shared_lock:
        sandbox = _shared.get(config)
        if sandbox is None:
            sandbox = _shared[config] = Sandbox(config)
        return sandbox
