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
   attempts and a burst of ordinary runs go on (``event_loop_lag_p99_ms``, goal <= 10), next to
   the same sampler on an idle loop (``baseline_lag_p99_ms``: the machine's own noise) and during
   the peer's burst below.
3. Latency: ``--runs`` short programs through the sandbox and through the peer at its best,
   ``anyio.run_process([python, -I, -S, -c, code])`` at the same concurrency (no isolation at all:
   the floor any process-per-call sandbox pays). The last line is
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

from envs.code.escapes import EscapeOutcome, run_escape_attempts
from envs.code.sandbox import Isolation, RunResult, RunStatus, Sandbox, SandboxConfig, SandboxLimits

WORK = "print(sum(i * i for i in range(100_000)))"
EXPECTED = f"{sum(i * i for i in range(100_000))}\n"


class LagSampler:
    """Sleeps 1 ms in a loop and records how late each wake-up is (ms)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._stop = anyio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            await anyio.sleep(0.001)
            self.lags.append(max(0.0, time.perf_counter() - t - 0.001) * 1000)

    def stop(self) -> None:
        self._stop.set()

    def p99(self) -> float:
        if not self.lags:
            return float("nan")
        ordered = sorted(self.lags)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def idle_lag_p99(seconds: float = 2.0) -> float:
    """The lag p99 (ms) of an idle loop: this machine's scheduling noise."""
    sampler = LagSampler()
    await while_sampling(sampler, lambda: anyio.sleep(seconds))
    return sampler.p99()


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

    def __init__(self, inner: Sandbox, failed_call_cost: float = 0.1):
        from backend.model import SMOLLM2, register_tokenizers
        from renderers_ext import load_renderer

        super().__init__(inner.config)
        self.inner = inner
        self.cost = failed_call_cost
        self.scores: list[tuple[RunResult, float, float]] = []
        """(the run, the step's reward, its ``code/failed_calls`` metric) per program."""
        register_tokenizers()
        self.renderer = load_renderer(None, SMOLLM2)

    async def isolation(self) -> Isolation:
        return await self.inner.isolation()

    async def run(self, code: str) -> RunResult:
        from tinker_cookbook.renderers import ToolCall

        from envs.code import CodeEnv, CodeEnvConfig, ToolFormat
        from envs.math import MathProblem
        from renderers_ext import render_action

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


async def escape_section(timeout_s: float, concurrency: int) -> tuple[int, float]:
    """Run the escape attempts for every strong mode x audit hook on/off; print one line per
    configuration and one per attempt that did not hold. Returns (escapes, lag p99 in ms)."""
    sampler = LagSampler()
    escapes = 0
    modes = await strong_modes()
    if not modes:
        print("escapes: no strong isolation works here (see envs.code.sandbox); nothing to attack")
        return 0, float("nan")

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
                scored = EnvScoredSandbox(Sandbox(config))
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
    return escapes, sampler.p99()


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
    print(
        f"baseline_lag_p99_ms={await idle_lag_p99():.2f} (idle loop: this machine's scheduling noise)",
        flush=True,
    )

    escapes, escape_lag = await escape_section(args.timeout, args.concurrency)

    sandbox = Sandbox(SandboxConfig(limits=SandboxLimits(timeout_s=10.0), concurrency=args.concurrency))
    mode = await sandbox.isolation()
    python = os.path.realpath(sys.executable)

    async def sandboxed() -> str:
        return (await sandbox.run(WORK)).output

    async def bare() -> str:
        done = await anyio.run_process([python, "-I", "-S", "-c", WORK], check=False)
        return done.stdout.decode()

    await sandboxed(), await bare()  # warm both (page cache, probe)
    burst_lag = LagSampler()
    sb_wall, sb_lat, sb_wrong = await while_sampling(  # type: ignore[misc]
        burst_lag, lambda: burst(args.runs, args.concurrency, sandboxed)
    )
    peer_lag = LagSampler()
    peer_wall, peer_lat, peer_wrong = await while_sampling(  # type: ignore[misc]
        peer_lag, lambda: burst(args.runs, args.concurrency, bare)
    )
    print(
        f"sandbox[{mode}]: {args.runs} runs in {sb_wall:.2f}s, median latency {statistics.median(sb_lat) * 1000:.0f} ms, "
        f"wrong={sb_wrong}"
    )
    print(
        f"bare subprocess (peer, no isolation): {args.runs} runs in {peer_wall:.2f}s, median latency "
        f"{statistics.median(peer_lat) * 1000:.0f} ms, wrong={peer_wrong}"
    )
    worst = max(x for x in (escape_lag, burst_lag.p99()) if x == x)  # nan: no escape section ran
    print(
        f"event_loop_lag_p99_ms_during_escapes={escape_lag:.2f} during_burst={burst_lag.p99():.2f} "
        f"(peer's burst, anyio.run_process: {peer_lag.p99():.2f})"
    )
    print(f"event_loop_lag_p99_ms={worst:.2f}")
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
