"""Bench: 64 concurrent gradings (4 pathological) while the event loop's lag is sampled.

    .venv/bin/python bench/grading.py [--workers 2] [--timeout 2.0] [--soft 0.8] [--quick]

(``--quick``: 16 gradings, 4 of them pathological, with a 1 s timeout.)

A sampler task sleeps 1 ms in a loop and records how late it wakes up: if grading blocked the
event loop (a hung sympy call, a blocking pipe read, a process start) the lag would show it.
The last two lines are ``event_loop_lag_p99_ms=<x>`` (goal <= 10) and
``graded=<n> timed_out=<m>`` (n must equal the number of gradings: nothing goes missing). A
``baseline_lag_p99_ms`` measured first with nothing running shows the machine's own scheduling
noise (on a shared, overloaded machine the process itself waits for a CPU).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio

from envs.math.grading import Grader, GraderConfig, GradeResult

PATHOLOGICAL = [
    "2^{2^{2^{2^{2^{2}}}}}",
    "9^{9^{9^{9}}}",
    "10^{10^{10}}",
    "3^{3^{3^{3^{3}}}}",
]


def workload(n: int = 64) -> list[tuple[str, str]]:
    """``n`` (answer, reference) pairs: the pathological ones spread among ordinary ones."""
    ordinary = [
        ("1,000", "1000"),
        ("\\frac{1}{2}", "0.5"),
        ("x+1", "1+x"),
        ("\\sqrt{8}", "2\\sqrt{2}"),
        ("(x+1)^2", "x^2+2x+1"),
        ("3", "4"),
        ("\\frac{1}{3}", "0.333333"),
        ("\\pi", "3.14"),
    ]
    pairs: list[tuple[str, str]] = []
    step = n // len(PATHOLOGICAL)
    for i in range(n):
        if i % step == step // 2 and len([p for p in pairs if p[0] in PATHOLOGICAL]) < len(PATHOLOGICAL):
            pairs.append((PATHOLOGICAL[i // step], "1"))
        else:
            a, b = ordinary[i % len(ordinary)]
            pairs.append((f"{a}+{i}" if "x" in a else a, f"{b}+{i}" if "x" in b else b))
    return pairs


async def run(config: GraderConfig, n: int) -> None:
    pairs = workload(n)
    lags: list[float] = []
    results: list[GradeResult | None] = [None] * len(pairs)
    with Grader(config) as grader:
        t_boot = time.perf_counter()
        await grader.warmup()
        print(f"workers={config.workers} ready_in_s={time.perf_counter() - t_boot:.2f}")
        done = anyio.Event()

        async def sampler(into: list[float], stop: anyio.Event) -> None:
            while not stop.is_set():
                t = time.perf_counter()
                await anyio.sleep(0.001)
                into.append(max(0.0, time.perf_counter() - t - 0.001) * 1000)

        # baseline: the same sampler with nothing else running (machine load shows up here)
        baseline: list[float] = []
        idle = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sampler, baseline, idle)
            await anyio.sleep(2.0)
            idle.set()

        async def grade(i: int) -> None:
            results[i] = await grader.grade(*pairs[i])

        t0 = time.perf_counter()
        async with anyio.create_task_group() as outer:
            outer.start_soon(sampler, lags, done)
            async with anyio.create_task_group() as tg:
                for i in range(len(pairs)):
                    tg.start_soon(grade, i)
            done.set()
        wall = time.perf_counter() - t0
        stats = grader.stats
    finished = [r for r in results if r is not None]
    lags.sort()
    p99 = lags[min(len(lags) - 1, int(0.99 * len(lags)))] if lags else float("nan")
    by_status: dict[str, int] = {}
    for r in finished:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    print(
        f"wall_s={wall:.2f} lag_samples={len(lags)} lag_median_ms={statistics.median(lags):.2f} lag_max_ms={lags[-1]:.2f}"
    )
    print(f"statuses={by_status} restarts={stats.restarts} errors={stats.errors}")
    baseline.sort()
    base_p99 = baseline[min(len(baseline) - 1, int(0.99 * len(baseline)))] if baseline else float("nan")
    print(f"baseline_lag_p99_ms={base_p99:.2f} (no grading running: scheduling noise of this machine)")
    print(f"event_loop_lag_p99_ms={p99:.2f}")
    print(f"graded={len(finished)} timed_out={sum(r.status == 'timeout' for r in finished)}")
    if len(finished) != len(pairs):
        raise SystemExit(f"{len(pairs) - len(finished)} gradings went missing")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=64, help="gradings (4 of them pathological)")
    parser.add_argument("--workers", type=int, default=2, help="grader worker processes")
    parser.add_argument("--timeout", type=float, default=2.0, help="hard timeout per check, seconds")
    parser.add_argument("--soft", type=float, default=0.8, help="soft timeout fraction (0: hard kill only)")
    parser.add_argument("--quick", action="store_true", help="16 gradings, 1 s timeout (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.n, args.timeout = 16, 1.0
    config = GraderConfig(workers=args.workers, timeout_s=args.timeout, soft_timeout_fraction=args.soft)
    anyio.run(run, config, args.n)


if __name__ == "__main__":
    main()
