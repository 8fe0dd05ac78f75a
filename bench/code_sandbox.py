"""Bench: the code sandbox's escape attempts, event-loop lag, and run latency against a bare subprocess.

    .venv/bin/python bench/code_sandbox.py [--runs 40] [--concurrency 2] [--timeout 2]

1. Escapes: every attempt of ``envs.code.escapes`` (read /etc/passwd, the repo, a secret file;
   connect to a loopback TCP port and send to a UDP port this bench listens on, with ``socket``
   and with raw ``ctypes``; fork bombs; 10 GB; endless loops; 100 MB of output; a daemon...)
   against each strong isolation available here, with the audit hook on and off (off: only the
   kernel's layers stand). Each attempt is played as a ``run_python`` tool call of a fresh
   ``CodeEnv`` episode (``failed_call_cost=0.1``). ``escapes=<n>`` counts attempts that escaped,
   were not stopped, or that the env did not score as one failed tool call (goal 0).
2. Event-loop lag: a task sleeps 1 ms in a loop and records how late it wakes, while the escape
   attempts and a burst of ordinary runs go on (``event_loop_lag_p99_ms``), next to the same
   sampler on an idle loop (``baseline_lag_p99_ms``: the machine's own noise) and during the
   peer's burst below. On a shared machine most of a late wake-up is the loop's thread waiting
   for a CPU (its run-queue wait, from ``/proc/thread-self/schedstat``); what is left is the loop
   being *blocked*: code running on it, or waiting for the GIL. ``event_loop_blocked_p99_ms``
   (goal <= 10) is the p99 of lateness minus run-queue wait; both are printed for every phase.
3. Latency: ``--runs`` short programs through the sandbox and through the peer at its best,
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
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio
from tinker_cookbook.renderers import Renderer, ToolCall

from backend.model import SMOLLM2, register_tokenizers
from envs.code import CodeEnv, CodeEnvConfig, ToolFormat
from envs.code.escapes import EscapeOutcome, run_escape_attempts
from envs.code.sandbox import Isolation, RunResult, RunStatus, Sandbox, SandboxConfig, SandboxLimits
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
    """The strong isolation modes that work on this machine, strongest first."""
    modes = []
    for mode in (Isolation.NAMESPACES, Isolation.LANDLOCK):
        if await Sandbox(SandboxConfig(isolation=mode))._probe(mode) is None:
            modes.append(mode)
    return modes


async def escape_section(timeout_s: float, concurrency: int) -> tuple[int, LagSampler | None]:
    """Run the escape attempts for every strong mode x audit hook on/off; print one line per
    configuration and one per attempt that did not hold. Returns (escapes, the loop's sampler)."""
    sampler = LagSampler()
    escapes = 0
    modes = await strong_modes()
    if not modes:
        print("escapes: no strong isolation works here (see envs.code.sandbox); nothing to attack")
        return 0, None
    register_tokenizers()
    renderer = load_renderer(None, SMOLLM2)  # loaded before the sampling: set-up, not the env's steps

    async def attack() -> int:
        total = 0
        for mode in modes:
            for hook in (True, False):
                config = SandboxConfig(
                    limits=SandboxLimits(timeout_s=timeout_s),
                    isolation=mode,
                    audit_hook=hook,
                    concurrency=concurrency,
                )
                t0 = time.perf_counter()
                scored = EnvScoredSandbox(Sandbox(config), renderer)
                outcomes = await run_escape_attempts(scored, concurrency=concurrency)
                failed = [o for o in outcomes if not o.held]
                misscored = scored.misscored(outcomes)
                total += len(failed) + len(misscored)
                statuses = Counter(str(o.result.status) for o in outcomes)
                print(
                    f"escapes[{mode},audit_hook={'on' if hook else 'off'}]={len(failed)}/{len(outcomes)} "
                    f"in {time.perf_counter() - t0:.1f}s statuses={dict(statuses)}",
                    flush=True,
                )
                for o in failed:
                    print(
                        f"  NOT HELD {o.name}: {o.result.status} {o.result.detail}; {o.evidence}", flush=True
                    )
                for line in misscored:
                    print(f"  NOT SCORED AS A FAILED CALL {line}", flush=True)
        return total

    escapes = int(await while_sampling(sampler, attack))  # type: ignore[call-overload]
    return escapes, sampler


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

    escapes, escape_lag = await escape_section(args.timeout, args.concurrency)

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
    (burst_lag, _, _, _), (same_lag, _, sb_lat, _), (peer_lag, _, peer_lat, _) = sides.values()
    ours = [s for s in (escape_lag, burst_lag, same_lag) if s is not None]
    print(
        f"event_loop_p99_ms during escapes: {escape_lag.line() if escape_lag else 'not run'}; "
        f"during the bursts: {burst_lag.line()} / {same_lag.line()} (nice=0); peer's burst "
        f"(anyio.run_process): {peer_lag.line()}; idle: {idle.line()} "
        "(blocked = lateness minus the loop thread's run-queue wait)"
    )
    print(f"event_loop_lag_p99_ms={max(s.p99() for s in ours):.2f}")
    print(f"event_loop_blocked_p99_ms={max(s.blocked_p99() for s in ours):.2f}")
    print(f"escapes={escapes}")
    print(
        f"sandbox_vs_bare_subprocess_latency_ratio={statistics.median(sb_lat) / statistics.median(peer_lat):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="short programs per side (latency)")
    parser.add_argument("--concurrency", type=int, default=2, help="runs at once")
    parser.add_argument("--timeout", type=float, default=2.0, help="time limit of the escape runs, s")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    anyio.run(main_async, args)


if __name__ == "__main__":
    main()
