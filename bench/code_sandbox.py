"""Bench: the code sandbox's escape table per mode, event-loop lag at 64 concurrent runs, a run's
host memory, and run latency against a bare subprocess.

    .venv/bin/python bench/code_sandbox.py [--runs 40] [--concurrency 2] [--timeout 3] [--burst 64] [--rounds 2]
    .venv/bin/python bench/code_sandbox.py --quick   # an end-to-end check (CI), no figure to quote

1. Escapes: every attempt of ``envs.code.escapes`` (files, the harness's loopback ports, processes
   outside the run and the harness's own limits and scheduling, metadata of outside files,
   System V IPC, host unix sockets, memory outside the address space, forged statuses, clean-up
   traps, process discovery, fork bombs, 10 GB, endless loops, 100 MB of output...) per mode, with
   the audit hook on and off (off: only the kernel's layers stand): ``namespaces`` as root, each
   attempt played as a ``run_python`` tool call of a fresh ``CodeEnv`` episode
   (``failed_call_cost=0.1``); ``userns`` and ``landlock`` as a user without root (``nobody``,
   through ``Sandbox.run``: that user cannot read the tokenizer's cache). One table row per
   mode and hook; a mode's documented gaps (``EscapeAttempt.gaps``) are listed apart.
   ``escapes=<n>`` counts attempts that escaped, were not stopped, or that the env did not score
   as one failed tool call (goal 0).
2. Event-loop lag: a task sleeps 1 ms in a loop and records how late it wakes; late wake-ups
   minus the loop thread's run-queue wait (``/proc/thread-self/schedstat``: the machine's load,
   not the loop) are the loop being *blocked*. Measured during the escapes, during the latency
   bursts, and during ``--burst`` (64) concurrent runs of a mix of programs (a sum, a
   1-byte-at-a-time writer, an error, a timeout) in every mode, before/after side by side
   (``--rounds`` interleaved pairs, :data:`SPAWNERS`): ``session-per-run`` gives each run a
   session, so an autogroup, of its own (the design before), ``spawner`` puts every run in the
   spawner's session (the default). Goals at 64 concurrent runs (spawner side): lateness p99
   <= 10 ms and no single late wake-up over 50 ms (the *lag* lines; blocked time is printed too).
   The runs' statuses are printed per burst: runs scheduled below this process take longer on a
   busy machine, and their time limit does not count their waits for a CPU.
3. Memory: one run of the default mode that tries every way to hold memory (its processes'
   address space, memory-backed files, System V and POSIX shared memory, its folder); the
   host's used memory is sampled every 10 ms (``MemAvailable``) against the stated bound
   ``max_processes * memory_mb + disk_mb`` (``landlock``: ``memory_mb``, plus ``disk_mb`` where its
   folder is on a memory file system).
4. Latency: ``--runs`` short programs through the sandbox and through the peer at its best,
   ``anyio.run_process([python, -I, -S, -c, code])`` at the same concurrency (no isolation at all:
   the floor any process-per-call sandbox pays). The sandbox runs twice: as configured by default
   (its runs niced +10 below the caller, so that the caller is scheduled first: slower on a busy
   machine) and with ``nice=0``, at the peer's priority; the last line compares the latter,
   ``sandbox_vs_bare_subprocess_latency_ratio=<r>``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio
from tinker_cookbook.renderers import Renderer, ToolCall

from backend.model import SMOLLM2, register_tokenizers
from envs.code import CodeEnv, CodeEnvConfig, ToolFormat
from envs.code import sandbox as sandbox_module
from envs.code.escapes import ESCAPE_ATTEMPTS, EscapeOutcome, run_escape_attempts
from envs.code.sandbox import Isolation, RunResult, RunStatus, Sandbox, SandboxConfig, SandboxLimits
from envs.code.unprivileged import run_as_user
from envs.math import MathProblem
from renderers_ext import load_renderer, render_action

WORK = "print(sum(i * i for i in range(100_000)))"
EXPECTED = f"{sum(i * i for i in range(100_000))}\n"


def _runqueue_ms() -> float | None:
    """The calling thread's total run-queue wait so far (ms); None where the kernel has no schedstat."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


def _p99(values: Sequence[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


class LagSampler:
    """Sleeps 1 ms in a loop and records how late each wake-up is (ms), and how much of that the
    loop's thread spent waiting for a CPU (run-queue wait: the machine's load, not the loop)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.blocked: list[float] = []
        """Per wake-up: lateness minus run-queue wait (ms), the part the loop itself caused."""
        self._stop = anyio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            wait0 = _runqueue_ms()
            t = time.perf_counter()
            await anyio.sleep(0.001)
            lag = max(0.0, time.perf_counter() - t - 0.001) * 1000
            wait1 = _runqueue_ms()
            self.lags.append(lag)
            queued = wait1 - wait0 if wait0 is not None and wait1 is not None else 0.0
            self.blocked.append(max(0.0, lag - queued))

    def stop(self) -> None:
        self._stop.set()

    def p99(self) -> float:
        """The lateness p99 (ms)."""
        return _p99(self.lags)

    def blocked_p99(self) -> float:
        """The p99 (ms) of lateness minus run-queue wait (where schedstat exists, else the lateness)."""
        return _p99(self.blocked)

    def line(self) -> str:
        return f"lag {self.p99():.2f} blocked {self.blocked_p99():.2f}"


async def idle_lag(seconds: float = 2.0) -> LagSampler:
    """A sampler run on an idle loop: this machine's scheduling noise."""
    sampler = LagSampler()
    await while_sampling(sampler, lambda: anyio.sleep(seconds))
    return sampler


async def while_sampling(sampler: LagSampler, work: Callable[[], Awaitable[object]]) -> object:
    """Run ``work`` with ``sampler`` going; return its result."""
    out: list[object] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(sampler.run)
        out.append(await work())
        sampler.stop()
    return out[0]


class EnvScoredSandbox(Sandbox):
    """Plays each program as a ``run_python`` tool call in a fresh :class:`~envs.code.CodeEnv`
    episode (on ``inner``, with ``failed_call_cost``) and records how the env scored the step, so
    every escape attempt goes through the env: the result the judge sees is the env's own run."""

    def __init__(self, inner: Sandbox, renderer: Renderer, failed_call_cost: float = 0.1):
        super().__init__(inner.config)
        self.inner = inner
        self.cost = failed_call_cost
        self.scores: list[tuple[RunResult, float, float]] = []
        """(the run, the step's reward, its ``code/failed_calls`` metric) per program."""
        self.renderer = renderer

    async def isolation(self) -> Isolation:
        return await self.inner.isolation()

    async def run(self, code: str) -> RunResult:
        config = CodeEnvConfig(failed_call_cost=self.cost, tool_format=ToolFormat.TOOL, fewshot=False)
        env = CodeEnv(self.renderer, MathProblem("1 + 1?", "2"), config, sandbox=self.inner)
        await env.initial_observation()
        call = ToolCall(
            function=ToolCall.FunctionBody(name="run_python", arguments=json.dumps({"code": code}))
        )
        action = render_action(self.renderer, {"role": "assistant", "content": "", "tool_calls": [call]})
        step = await env.step(action)
        result = env.runs[-1]
        self.scores.append((result, step.reward, float(step.metrics.get("code/failed_calls", 0.0))))
        return result

    def misscored(self, outcomes: Sequence[EscapeOutcome]) -> list[str]:
        """Attempts the env did not score by their run: a failed run must cost one failed tool
        call (reward ``-failed_call_cost``, ``code/failed_calls`` 1), a clean one nothing."""
        bad = []
        for o in outcomes:
            reward, failed = next((r, f) for res, r, f in self.scores if res is o.result)
            should_fail = o.result.status is not RunStatus.OK
            if failed != float(should_fail) or abs(reward + self.cost * should_fail) > 1e-9:
                bad.append(f"{o.name}: {o.result.status} scored reward={reward} failed_calls={failed}")
        return bad


async def strong_modes() -> list[Isolation]:
    """The strong isolation modes that work on this machine for this user, strongest first."""
    modes = []
    for mode in (Isolation.NAMESPACES, Isolation.USERNS, Isolation.LANDLOCK):
        if await Sandbox(SandboxConfig(isolation=mode))._probe(mode) is None:
            modes.append(mode)
    return modes


def table_row(
    mode: Isolation, hook: bool, outcomes: Sequence[EscapeOutcome], seconds: float, extra: str = ""
) -> int:
    """Print one row of the escape table (and a line per attempt that did not hold); the count."""
    claimed = [o for o in outcomes if not o.known_gap]
    failed = [o for o in claimed if not o.held]
    gaps = sorted(o.name for o in outcomes if o.known_gap and o.escaped)
    statuses = Counter(str(o.result.status) for o in outcomes)
    print(
        f"escapes[{mode},audit_hook={'on' if hook else 'off'}]={len(failed)}/{len(claimed)} "
        f"in {seconds:.1f}s statuses={dict(statuses)}" + (f" documented_gaps={gaps}" if gaps else "") + extra,
        flush=True,
    )
    for o in failed:
        print(f"  NOT HELD {o.name}: {o.result.status} {o.result.detail}; {o.evidence}", flush=True)
    return len(failed)


async def escape_section(timeout_s: float, concurrency: int, sample: int = 1) -> tuple[int, LagSampler | None]:
    """Run the escape attempts for this user's strongest mode (``namespaces`` as root) x audit
    hook on/off through ``CodeEnv``; one table row per configuration. Returns (escapes, sampler)."""
    sampler = LagSampler()
    modes = await strong_modes()
    if not modes:
        print("escapes: no strong isolation works here (see envs.code.sandbox); nothing to attack")
        return 0, None
    mode = modes[0]
    register_tokenizers()
    renderer = load_renderer(None, SMOLLM2)  # loaded before the sampling: set-up, not the env's steps

    async def attack() -> int:
        total = 0
        for hook in (True, False):
            config = SandboxConfig(
                limits=SandboxLimits(timeout_s=timeout_s),
                isolation=mode,
                audit_hook=hook,
                concurrency=concurrency,
            )
            t0 = time.perf_counter()
            scored = EnvScoredSandbox(Sandbox(config), renderer)
            outcomes = await run_escape_attempts(scored, ESCAPE_ATTEMPTS[::sample], concurrency=concurrency)
            total += table_row(mode, hook, outcomes, time.perf_counter() - t0, " (through CodeEnv)")
            misscored = scored.misscored(outcomes)
            total += len(misscored)
            for line in misscored:
                print(f"  NOT SCORED AS A FAILED CALL {line}", flush=True)
        return total

    escapes = int(await while_sampling(sampler, attack))  # type: ignore[call-overload]
    return escapes, sampler


def nonroot_main(timeout_s: float, concurrency: int, burst_runs: int, rounds: int = 1, sample: int = 1) -> None:
    """Run as a user without root (see :func:`nonroot_section`): the escape table of ``userns`` and
    ``landlock`` (hook on and off), the 64-run bursts (before/after) in each; a JSON line last."""

    async def main() -> dict[str, object]:
        escapes = 0
        modes = [m for m in await strong_modes() if m in (Isolation.USERNS, Isolation.LANDLOCK)]
        for mode in modes:
            for hook in (True, False):
                config = SandboxConfig(
                    limits=SandboxLimits(timeout_s=timeout_s),
                    isolation=mode,
                    audit_hook=hook,
                    concurrency=concurrency,
                )
                t0 = time.perf_counter()
                outcomes = await run_escape_attempts(
                    Sandbox(config), ESCAPE_ATTEMPTS[::sample], concurrency=concurrency
                )
                escapes += table_row(mode, hook, outcomes, time.perf_counter() - t0, " (as nobody)")
        lag = await burst_ab(burst_runs, modes, rounds)
        memory = [await memory_section(mode) for mode in modes]
        return {"escapes": escapes, "modes": [str(m) for m in modes], "lag": lag, "memory": memory}

    print(json.dumps(anyio.run(main)), flush=True)


def nonroot_section(
    timeout_s: float, concurrency: int, burst_runs: int, rounds: int = 1, sample: int = 1
) -> dict[str, Any] | None:
    """As root: run :func:`nonroot_main` as user ``nobody`` and echo its lines; its JSON result."""
    if os.geteuid() != 0:
        return None
    code = (
        "from bench.code_sandbox import nonroot_main\n"
        f"nonroot_main({timeout_s!r}, {concurrency!r}, {burst_runs!r}, {rounds!r}, {sample!r})\n"
    )
    done = run_as_user(code, timeout=1800)
    lines = done.stdout.strip().splitlines()
    for line in lines[:-1]:
        print(line, flush=True)
    if done.returncode != 0 or not lines:
        print(f"escapes as nobody: the run failed ({done.returncode}): {done.stderr[-2000:]}", flush=True)
        return {"escapes": 1, "modes": [], "lag": []}
    return json.loads(lines[-1])


BURST_PROGRAMS = (
    WORK,
    "import sys\nfor _ in range(3000):\n    sys.stdout.write('x')\n    sys.stdout.flush()",
    "raise ValueError('bad')",
    "import time\ntime.sleep(60)",
)
"""What the 64 concurrent runs do: a sum, one byte at a time, an error, a timeout."""


SPAWNERS = ("session-per-run", "spawner")
"""How runs are scheduled: ``session-per-run`` (each run a session of its own, so under
``sched_autogroup`` an autogroup of its own, weighing as much as the trainer's: the design before
the runs shared one, the *before* side) and ``spawner`` (the default: every run in the spawner's
session, one autogroup at the trainer's autogroup nice). Both start runs through a spawner process
at this process's nice + 10."""


async def burst_lag(runs: int, isolation: Isolation, spawner: str = "spawner") -> dict[str, float | str]:
    """``runs`` runs at once (``concurrency=runs``) of :data:`BURST_PROGRAMS` in turn, scheduled
    as ``spawner`` says (:data:`SPAWNERS`); the event loop's lateness and blocked time (p99 and
    worst, ms) while they go."""
    saved = sandbox_module._spawner
    if spawner == "session-per-run":
        sandbox_module._spawner = sandbox_module._Spawner(session_per_run=True)
    try:
        return await _burst_lag(runs, isolation, spawner)
    finally:
        if sandbox_module._spawner is not saved:
            sandbox_module._spawner.close()
        sandbox_module._spawner = saved


async def _burst_lag(runs: int, isolation: Isolation, spawner: str) -> dict[str, float | str]:
    sandbox = Sandbox(
        SandboxConfig(limits=SandboxLimits(timeout_s=3.0), isolation=isolation, concurrency=runs)
    )
    mode = await sandbox.isolation()
    await sandbox.run("pass")  # the probe, the spawner and the page cache: set-up
    sampler = LagSampler()
    statuses: Counter[str] = Counter()

    async def work() -> None:
        async def one(i: int) -> None:
            statuses[str((await sandbox.run(BURST_PROGRAMS[i % len(BURST_PROGRAMS)])).status)] += 1

        async with anyio.create_task_group() as tg:
            for i in range(runs):
                tg.start_soon(one, i)

    t0 = time.perf_counter()
    await while_sampling(sampler, work)
    out: dict[str, float | str] = {
        "mode": str(mode),
        "spawner": spawner,
        "seconds": time.perf_counter() - t0,
        "lag_p99_ms": sampler.p99(),
        "lag_max_ms": max(sampler.lags, default=0.0),
        "blocked_p99_ms": sampler.blocked_p99(),
        "blocked_max_ms": max(sampler.blocked, default=0.0),
        "statuses": json.dumps(dict(statuses)),
        "load": os.getloadavg()[0],
    }
    print(
        f"burst[{mode}, {runs} at once, {spawner}]: {out['seconds']:.1f}s statuses={dict(statuses)}; event loop ms: "
        f"lag p99 {out['lag_p99_ms']:.2f} max {out['lag_max_ms']:.1f}, blocked p99 {out['blocked_p99_ms']:.2f} "
        f"max {out['blocked_max_ms']:.1f} (load {out['load']:.1f})",
        flush=True,
    )
    return out


async def burst_ab(runs: int, modes: Sequence[Isolation], rounds: int) -> list[dict[str, float | str]]:
    """Before/after, interleaved: for each mode, ``rounds`` x (session-per-run, spawner) bursts."""
    out = []
    for mode in modes:
        for _ in range(rounds):
            for spawner in SPAWNERS:
                out.append(await burst_lag(runs, mode, spawner))
    return out


MEMORY_HOG = """
import os, time
mb = {memory_mb}
def hold():
    blocks = []
    try:
        while True:
            blocks.append(b"x" * (16 << 20))
    except MemoryError:
        pass
    for attempt in (lambda: os.memfd_create("m"), lambda: os.open("/dev/shm/hog", os.O_CREAT | os.O_WRONLY)):
        try:
            fd = attempt()
            for _ in range(64):
                os.write(fd, b"y" * (16 << 20))
        except OSError:
            pass
    time.sleep(3)
    return blocks
for _ in range({max_processes} - 1):
    try:
        if os.fork() == 0:
            hold()
            os._exit(0)
    except OSError:
        break
try:
    for i in range(max(1, ({disk_mb} - 1) // {file_mb})):  # its folder, short of the disk limit
        with open(f"f{{i}}", "wb") as f:
            f.write(b"z" * ({file_mb} << 20))
except OSError:
    pass
hold()
"""


def _available_mb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _shmem_mb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _on_memory_fs(path: str) -> bool:
    """Whether ``path`` is on a tmpfs (its files are memory)."""
    best, kind = "", ""
    with open("/proc/mounts") as f:
        for line in f:
            fields = line.split()
            point = fields[1]
            if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, kind = point, fields[2]
    return kind in ("tmpfs", "ramfs")


def _code_rss_mb(needle: bytes) -> float:
    """Resident memory of the run's processes: those with ``needle`` (its folder) in their command
    line, its supervisor included (conservative: the memory cgroup counts it too)."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if needle not in f.read():
                    continue
            with open(f"/proc/{name}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f if b":" in line)
            total += int(fields.get(b"VmRSS", b"0 kB").split()[0])
        except (OSError, ValueError):
            continue
    return total / 1024


async def memory_section(isolation: Isolation = Isolation.AUTO) -> tuple[float, float, float, str]:
    """One run of the default mode holding all the memory it can. Returns (the peak of the code's
    processes' resident memory plus the host's shared-memory growth, MB; the peak drop of the
    host's available memory, MB, which other load on the machine blurs; the bound, MB; the mode)."""
    limits = SandboxLimits(timeout_s=20.0)  # time to fill it all, at this process's priority
    folder = tempfile.mkdtemp(prefix="turngym-bench-memory-")
    os.chmod(folder, 0o755)
    sandbox = Sandbox(
        SandboxConfig(limits=limits, audit_hook=False, tmp_dir=folder, nice=0, isolation=isolation)
    )
    mode = await sandbox.isolation()
    code = MEMORY_HOG.format(
        memory_mb=limits.memory_mb,
        max_processes=limits.max_processes,
        file_mb=limits.file_mb,
        disk_mb=limits.disk_mb,
    )
    accounted: list[float] = []
    available: list[float] = []
    stop = threading.Event()
    shmem0, available0 = _shmem_mb(), _available_mb()

    def sample() -> None:
        while not stop.wait(0.02):
            accounted.append(_code_rss_mb(folder.encode()) + max(0.0, _shmem_mb() - shmem0))
            available.append(available0 - _available_mb())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        result = await sandbox.run(code)
    finally:
        stop.set()
        thread.join()
        os.rmdir(folder)
    bound = limits.max_processes * limits.memory_mb + limits.disk_mb
    if mode is Isolation.LANDLOCK:  # one process; its folder is memory only on a memory file system
        bound = limits.memory_mb + (limits.disk_mb if _on_memory_fs(folder) else 0)
    peak, host_drop = max(accounted, default=0.0), max(available, default=0.0)
    print(
        f"memory[{mode}]: a run holding all it can peaked at {peak:.0f} MB (its processes' resident "
        f"memory + the host's shared-memory growth; the host's available memory dropped by {host_drop:.0f} MB "
        f"at most, other load included); bound {bound} MB; "
        f"run {result.status} {result.detail}",
        flush=True,
    )
    return peak, host_drop, float(bound), str(mode)


async def burst(
    runs: int, concurrency: int, one: Callable[[], Awaitable[str]]
) -> tuple[float, list[float], int]:
    """``runs`` calls of ``one`` at ``concurrency``; (wall s, per-call latencies s, wrong outputs)."""
    latencies: list[float] = []
    wrong = 0
    limiter = anyio.Semaphore(concurrency)

    async def call() -> None:
        nonlocal wrong
        async with limiter:
            t = time.perf_counter()
            out = await one()
            latencies.append(time.perf_counter() - t)
            wrong += out != EXPECTED

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(runs):
            tg.start_soon(call)
    return time.perf_counter() - t0, latencies, wrong


async def main_async(args: argparse.Namespace) -> None:
    idle = await idle_lag()
    print(
        f"baseline_lag_p99_ms={idle.p99():.2f} blocked={idle.blocked_p99():.2f} "
        "(idle loop: this machine's scheduling noise)",
        flush=True,
    )

    escapes, escape_lag = await escape_section(args.timeout, args.concurrency, args.sample)
    nonroot = await anyio.to_thread.run_sync(
        nonroot_section, args.timeout, args.concurrency, args.burst, args.rounds, args.sample
    )
    if nonroot is not None:
        escapes += int(nonroot["escapes"])
    root_modes = await strong_modes()
    bursts = await burst_ab(args.burst, root_modes[:1], args.rounds)
    bursts += list((nonroot or {}).get("lag") or [])
    memory = [await memory_section()] + [tuple(m) for m in (nonroot or {}).get("memory", [])]

    # the default sandbox (its runs niced +10 below this process, autogroup included) and one at
    # this process's own priority, like the peer's processes: the ratio compares those two
    limits = SandboxLimits(timeout_s=10.0)
    default = Sandbox(SandboxConfig(limits=limits, concurrency=args.concurrency))
    same = Sandbox(SandboxConfig(limits=limits, concurrency=args.concurrency, nice=0))
    mode = await default.isolation()
    python = os.path.realpath(sys.executable)

    def sandboxed(sandbox: Sandbox) -> Callable[[], Awaitable[str]]:
        async def one() -> str:
            return (await sandbox.run(WORK)).output

        return one

    async def bare() -> str:
        done = await anyio.run_process([python, "-I", "-S", "-c", WORK], check=False)
        return done.stdout.decode()

    for warm in (sandboxed(default), sandboxed(same), bare):  # page cache, probe
        await warm()
    sides: dict[str, tuple[LagSampler, float, list[float], int]] = {}
    for name, one in (
        (f"sandbox[{mode}, nice=10 (default)]", sandboxed(default)),
        (f"sandbox[{mode}, nice=0]", sandboxed(same)),
        ("bare subprocess (peer, no isolation)", bare),
    ):
        lag = LagSampler()
        wall, latencies, wrong = await while_sampling(  # type: ignore[misc]
            lag, lambda one=one: burst(args.runs, args.concurrency, one)
        )
        sides[name] = (lag, wall, latencies, wrong)
        print(
            f"{name}: {args.runs} runs in {wall:.2f}s, median latency {statistics.median(latencies) * 1000:.0f} ms, "
            f"wrong={wrong}; event loop p99 ms: {lag.line()}",
            flush=True,
        )
    (default_lag, _, _, _), (same_lag, _, sb_lat, _), (peer_lag, _, peer_lat, _) = sides.values()
    ours = [s for s in (escape_lag, default_lag, same_lag) if s is not None]
    print(
        f"event_loop_p99_ms during escapes: {escape_lag.line() if escape_lag else 'not run'}; "
        f"during the bursts: {default_lag.line()} / {same_lag.line()} (nice=0); peer's burst "
        f"(anyio.run_process): {peer_lag.line()}; idle: {idle.line()} "
        "(blocked = lateness minus the loop thread's run-queue wait)"
    )
    print(f"event_loop_lag_p99_ms={max(s.p99() for s in ours):.2f}")
    print(f"event_loop_blocked_p99_ms={max(s.blocked_p99() for s in ours):.2f}")
    attempts = "every attempt" if args.sample == 1 else f"every {args.sample}th attempt (--quick)"
    print(f"escapes={escapes} (goal 0; every mode, audit hook on and off; {attempts})")
    for spawner in SPAWNERS:
        side = [b for b in bursts if b["spawner"] == spawner]
        if not side:
            continue
        per_mode = {
            str(m): [b for b in side if b["mode"] == m] for m in dict.fromkeys(b["mode"] for b in side)
        }

        def worst(of: list[dict[str, float | str]], key: str) -> float:
            return max(float(b[key]) for b in of)

        def timeouts(of: list[dict[str, float | str]]) -> int:
            return sum(int(json.loads(str(b["statuses"])).get("timeout", 0)) for b in of)

        print(
            f"{spawner}: event loop at {args.burst} runs, per mode (lag p99 / worst, blocked p99 / "
            f"worst ms; timeouts per burst of {args.burst}, a quarter of which sleep past the limit; over "
            f"{args.rounds} round(s)): "
            + ", ".join(
                f"{m} {worst(bs, 'lag_p99_ms'):.2f} / {worst(bs, 'lag_max_ms'):.1f}, "
                f"{worst(bs, 'blocked_p99_ms'):.2f} / {worst(bs, 'blocked_max_ms'):.1f}; "
                f"timeouts {timeouts(bs) / len(bs):.0f}"
                for m, bs in per_mode.items()
            ),
            flush=True,
        )
    after = [b for b in bursts if b["spawner"] == "spawner"] or bursts
    modes = sorted({str(b["mode"]) for b in after})
    lag_p99 = max(float(b["lag_p99_ms"]) for b in after)
    lag_max = max(float(b["lag_max_ms"]) for b in after)
    blocked_p99 = max(float(b["blocked_p99_ms"]) for b in after)
    blocked_max = max(float(b["blocked_max_ms"]) for b in after)
    print(f"event_loop_{args.burst}_runs_lag_p99_ms={lag_p99:.2f} (goal <= 10; spawner; modes {modes})")
    print(f"event_loop_{args.burst}_runs_lag_max_ms={lag_max:.1f} (goal <= 50; spawner)")
    print(f"event_loop_{args.burst}_runs_blocked_p99_ms={blocked_p99:.2f} (spawner)")
    print(f"event_loop_{args.burst}_runs_blocked_max_ms={blocked_max:.1f} (spawner)")
    over = [f"{m[3]} {m[0]:.0f}/{m[2]:.0f}" for m in memory if m[0] > m[2]]
    print(
        "run_host_memory_mb="
        + ", ".join(f"{m[3]}:{m[0]:.0f}/{m[2]:.0f}" for m in memory)
        + f" (peak/bound per mode; goal: within the bound; over: {over or 'none'})"
    )
    print(
        f"sandbox_vs_bare_subprocess_latency_ratio={statistics.median(sb_lat) / statistics.median(peer_lat):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="short programs per side (latency)")
    parser.add_argument("--concurrency", type=int, default=2, help="runs at once")
    parser.add_argument("--timeout", type=float, default=3.0, help="time limit of the escape runs, s")
    parser.add_argument("--burst", type=int, default=64, help="runs at once for the event-loop lag figures")
    parser.add_argument(
        "--rounds", type=int, default=2, help="before/after burst pairs per mode (interleaved)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="an end-to-end check: every 8th escape attempt, 4 latency runs, bursts of 8, one round, "
        "1 s escape time limit (the whole escape suite runs in tests/test_code_sandbox.py)",
    )
    args = parser.parse_args()
    args.sample = 1
    if args.quick:
        args.runs, args.concurrency, args.timeout, args.burst, args.rounds, args.sample = 4, 4, 1.0, 8, 1, 8
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    anyio.run(main_async, args)


if __name__ == "__main__":
    main()
