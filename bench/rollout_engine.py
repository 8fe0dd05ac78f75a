"""Rollout engine benchmarks, side by side in one run (prints figures, ends with ratio lines).

1. Throughput: the same synthetic 20-turn env and a zero-latency scripted completer, 64 groups
   x 8 envs, through the cookbook's ``do_group_rollout`` (gathered per batch, as its trainer
   does) and through ``rollout.RolloutEngine.run_batch`` (default config: sampling gate of 64,
   exact extension check). Runs are interleaved, best of ``--repeats``
   (the machine is shared: best-of is the least noisy estimate of each side's cost).
   -> ``ratio_steps_per_s_vs_cookbook`` (goal >= 1.5)
2. Latency: 64 x 8 envs, 20 turns, a completer sleeping 20 ms per call, concurrency limit 64.
   Ideal critical path = max(total sampling time / 64, one rollout's sampling time).
   -> ``ratio_wall_vs_ideal`` (goal <= 1.15)
3. Event-loop lag: rollouts as in 2 while every env step does pure-Python CPU reward work
   offloaded to worker processes (``anyio.to_process``); a probe task sleeps 1 ms in a loop and
   records how late it wakes. -> ``event_loop_lag_p99_ms`` (goal <= 10)

Run: ``.venv/bin/python bench/rollout_engine.py`` (about a minute; ``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Sequence

import anyio
import anyio.to_process
import tinker
from tinker_cookbook.completers import StopCondition
from tinker_cookbook.rl.rollouts import do_group_rollout
from tinker_cookbook.rl.types import Action, ActionExtra, Env, StepResult

from rollout import ExtensionCheck, RolloutConfig, RolloutEngine
from rollout.testing import ScriptedCompleter, SyntheticGroup, cpu_work

ACTION = [7, 8, 2]
FEEDBACK = [9, 10]
PROMPT = [1, 3, 4, 5]
TURNS = 20


def _ob(tokens: list[int]) -> tinker.ModelInput:
    return tinker.ModelInput(chunks=[tinker.EncodedTextChunk(tokens=tokens)])


# Observations are precomputed once (turn t -> prompt + t * (action + feedback)), so the env
# costs almost nothing and the benchmark measures the engines, not pydantic validation.
_OBS = [_ob(PROMPT + (ACTION + FEEDBACK) * t) for t in range(TURNS)]
_EMPTY = tinker.ModelInput.empty()


class CheapEnv(Env):
    """20-turn synthetic env; extension property holds; reward 1 per turn."""

    __slots__ = ("turn",)

    def __init__(self) -> None:
        self.turn = 0

    async def initial_observation(self) -> tuple[tinker.ModelInput, StopCondition]:
        return _OBS[0], [2]

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        if action != ACTION:
            raise ValueError(f"unexpected action {action}")
        self.turn += 1
        if self.turn >= TURNS:
            return StepResult(1.0, True, _EMPTY, [2])
        return StepResult(1.0, False, _OBS[self.turn], [2])


def _builders(n_groups: int, size: int) -> list[SyntheticGroup]:
    return [SyntheticGroup(lambda _i: CheapEnv(), size=size) for _ in range(n_groups)]


async def _cookbook_batch(n_groups: int, size: int) -> float:
    builders = _builders(n_groups, size)
    policy = ScriptedCompleter(script=[ACTION])
    t0 = time.perf_counter()
    await asyncio.gather(*[do_group_rollout(b, policy) for b in builders])
    return time.perf_counter() - t0


async def _our_batch(n_groups: int, size: int, config: RolloutConfig) -> float:
    builders = _builders(n_groups, size)
    engine = RolloutEngine(ScriptedCompleter(script=[ACTION]), config)
    t0 = time.perf_counter()
    result = await engine.run_batch(builders)
    dt = time.perf_counter() - t0
    assert result.metrics["rollouts/completed"] == n_groups * size, result.metrics
    return dt


def throughput(repeats: int, n_groups: int, size: int) -> float:
    # Freeze the (large: torch, transformers) import-time heap so a full GC pass does not land
    # at random inside one side's timing; both sides benefit equally.
    gc.collect()
    gc.freeze()
    steps = n_groups * size * TURNS
    variants: dict[str, RolloutConfig] = {
        "ours (gate 64, full check)": RolloutConfig(),
        "ours (gate 64, boundary check)": RolloutConfig(extension_check=ExtensionCheck.BOUNDARY),
        "ours (no gate, no check)": RolloutConfig(
            max_concurrent_samples=None, extension_check=ExtensionCheck.OFF
        ),
    }
    best: dict[str, float] = {"cookbook do_group_rollout": float("inf")} | {k: float("inf") for k in variants}
    for _ in range(repeats):
        best["cookbook do_group_rollout"] = min(
            best["cookbook do_group_rollout"], asyncio.run(_cookbook_batch(n_groups, size))
        )
        for name, cfg in variants.items():
            best[name] = min(best[name], asyncio.run(_our_batch(n_groups, size, cfg)))
    print(f"== throughput: {n_groups} groups x {size} envs x {TURNS} turns, zero-latency completer ==")
    for name, dt in best.items():
        print(f"  {name:32s} {steps / dt:10.0f} env-steps/s  ({dt * 1e3:.1f} ms)")
    return best["cookbook do_group_rollout"] / best["ours (gate 64, full check)"]


async def _latency(n_groups: int, size: int, delay: float, limit: int) -> tuple[float, float, int]:
    policy = ScriptedCompleter(script=[ACTION], delay_s=delay)
    engine = RolloutEngine(policy, RolloutConfig(max_concurrent_samples=limit))
    t0 = time.perf_counter()
    await engine.run_batch(_builders(n_groups, size))
    wall = time.perf_counter() - t0
    calls = n_groups * size * TURNS
    ideal = max(calls * delay / limit, TURNS * delay)
    return wall, ideal, policy.max_in_flight


def latency(n_groups: int, size: int) -> float:
    wall, ideal, peak = asyncio.run(_latency(n_groups, size, 0.020, 64))
    print(f"== latency: {n_groups} x {size} envs x {TURNS} turns, 20 ms per call, limit 64 ==")
    print(f"  wall {wall:.3f} s, ideal critical path {ideal:.3f} s, peak in-flight calls {peak}")
    return wall / ideal


class CpuRewardEnv(CheapEnv):
    """CheapEnv whose every step grades with ``cpu_work`` in a worker process."""

    work = 20_000

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        await anyio.to_process.run_sync(cpu_work, self.work)
        return await super().step(action, extra=extra)


async def _lag(n_groups: int, size: int) -> tuple[list[float], float]:
    lags: list[float] = []
    stop = anyio.Event()

    async def probe() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            await anyio.sleep(0.001)
            lags.append(max(0.0, time.perf_counter() - t - 0.001))

    await anyio.to_process.run_sync(cpu_work, 10)  # start the worker pool before measuring
    builders: Sequence[SyntheticGroup] = [
        SyntheticGroup(lambda _i: CpuRewardEnv(), size=size) for _ in range(n_groups)
    ]
    engine = RolloutEngine(
        ScriptedCompleter(script=[ACTION], delay_s=0.020), RolloutConfig(max_concurrent_samples=64)
    )
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(probe)
        await engine.run_batch(builders)
        stop.set()
    return lags, time.perf_counter() - t0


def lag(n_groups: int, size: int) -> float:
    lags, wall = anyio.run(_lag, n_groups, size)
    lags.sort()
    p50 = lags[len(lags) // 2] * 1e3
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1e3
    print(f"== event-loop lag: {n_groups} x {size} envs, CPU reward work in worker processes ==")
    print(
        f"  {len(lags)} probes over {wall:.2f} s: p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {lags[-1] * 1e3:.2f} ms"
    )
    return p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke run)")
    args = parser.parse_args()
    groups, size, repeats = (8, 4, 1) if args.quick else (64, 8, args.repeats)
    ratio_tp = throughput(repeats, groups, size)
    ratio_wall = latency(groups, size)
    p99 = lag(groups if args.quick else 16, size)
    print(f"ratio_steps_per_s_vs_cookbook={ratio_tp:.2f}")
    print(f"ratio_wall_vs_ideal={ratio_wall:.3f}")
    print(f"event_loop_lag_p99_ms={p99:.2f}")


if __name__ == "__main__":
    main()
