"""Rollout engine benchmark: what the engine adds to a rollout's wall time at realistic latencies.

1. Overhead at 5 ms per call: 64 concurrent envs (8 groups x 8) x 20 turns, a completer that
   takes 5 ms per call (``asyncio.sleep``), through ``rollout.RolloutEngine.run_batch`` (default
   config: sampling limit 64, exact extension check) and through a bare asyncio loop (one task
   per env under ``asyncio.gather``, calling the same completer and env and recording the same
   cookbook ``Transition`` s). Runs alternate, engine and bare in pairs (in turn first), so a
   change of the machine's load hits both runs of a pair alike.
   -> ``engine_overhead_vs_bare_5ms`` = median over ``--pairs`` pairs of (engine CPU - bare
   CPU) / bare wall, CPU being the loop thread's (goal <= 0.01): the wall the engine's extra
   work adds when it is on the critical path. Printed with its 95% bootstrap interval and the
   pairs' quartiles, and beside it the wall figure, median over pairs of engine wall / bare wall
   - 1 (``engine_wall_overhead_5ms``, with its interval), and each side's CPU per call.
2. The same comparison with the local sampler on the tiny model (``backend.TINY``, CPU): 16 envs
   x 4 turns of real sampling calls, batched by the sampler across the envs (a second figure, no
   goal; skipped with ``--no-sampler``).
3. Wall vs ideal: 64 groups x 8 envs x 20 turns, 20 ms per call, sampling limit 64. Ideal
   critical path = max(total sampling time / 64, one rollout's sampling time). Printed beside
   it, alternating with the engine's runs: the bare loop of 1. with its calls behind the
   engine's own limiter, an ``anyio.Semaphore(64, fast_acquire=True)`` (the same env work and
   slot hand-offs, written plainly), and the same sleeps with no env and no
   engine (64 tasks in a chain: the event loop wakes timers late, epoll has millisecond
   resolution, a cost no engine can remove).
   -> ``ratio_wall_vs_ideal`` (goal <= 1.15), after a line with the
   bare loop's figure and the floor (``bare_limited_vs_ideal``, ``bare_sleeps_vs_ideal``).

Why the figures are what they are:

- Why x is a CPU figure: wall time at 5 ms does not rank the work. The event loop sleeps until
  its next timer rounded up to a millisecond (``selectors`` and epoll), and with 64 timers set in
  one burst a turn's end depends on whether the next timer is due just before or just after the
  loop finishes a stretch of work (then it sleeps a whole millisecond more): a phase effect that
  moves with the CPU per call and with the load, and that made the bare loop with a few
  microseconds of pure spinning added to each env step *faster* than the bare loop, by a few
  percent, systematically. A wall ratio can show the engine faster than a loop that does less
  work, or slower by several percent, from run to run. The loop thread's CPU time has no phase:
  (engine CPU - bare CPU) / bare wall grows with every microsecond the engine adds, and is the
  wall overhead when the loop is the bottleneck (a busy machine, or more envs); on an idle
  machine part of it hides behind other envs' sleeps, by an amount no run pins down.
- At 20 ms behind 64 slots, 64 calls end in the same millisecond. The bare loop runs every woken
  rollout's step (env step, transition, slot hand-off) before any of the next calls starts: a
  round's whole CPU, and a pause of the cyclic GC (the batch's trajectories are live objects), is
  on its critical path, 160 times over. The engine hands a freed slot over first (the waiting call
  starts before the releasing episode's env step), so its critical path holds the hand-offs and
  the env steps overlap the next calls. The bare loop is thus not a floor for the engine: it is
  the plain way to write the loop, measured beside it; the bare sleeps are the floor no engine
  removes (the event loop's lateness).
- The bare loop uses the engine's limiter, not ``asyncio.Semaphore``: Python 3.11's
  ``Semaphore.release`` walks the waiters already woken but not yet run, quadratic in a burst
  of 64 releases, a cost that would flatter any engine measured against it.

Every run is timed inside its event loop (``asyncio.run``'s set-up and teardown are no side's).

The last line is ``engine_overhead_vs_bare_5ms=<x> ratio_wall_vs_ideal=<y>``.

Run: ``.venv/bin/python bench/rollout_engine.py`` (``--quick``: smaller sizes, one run pair).
``--engine-root DIR`` measures the ``rollout`` package of another checkout with these workloads
(e.g. ``git archive <commit> | tar -x -C DIR``); ``--compare DIR [DIR ...]`` runs this checkout
and each DIR in turn, one subprocess per side and round, and prints every side's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parents[1]


def _engine_root() -> Path:
    """The checkout whose ``rollout`` package is measured (this one unless ``--engine-root``)."""
    if "--engine-root" in sys.argv:
        return Path(sys.argv[sys.argv.index("--engine-root") + 1]).resolve()
    return _HERE


# That checkout's packages, not whatever the venv's editable install points at.
sys.path.insert(0, str(_HERE))
sys.path.insert(0, str(_engine_root()))

import anyio  # noqa: E402
import tinker  # noqa: E402
from tinker_cookbook.completers import StopCondition, TokenCompleter, TokensWithLogprobs  # noqa: E402
from tinker_cookbook.rl.types import Action, ActionExtra, Env, StepResult, Trajectory, Transition  # noqa: E402

from rollout import EngineConfig, RolloutEngine, RolloutLimits  # noqa: E402
from rollout.testing import SyntheticGroup  # noqa: E402

ACTION = [7, 8, 2]
FEEDBACK = [9, 10]
PROMPT = [1, 3, 4, 5]
TURNS = 20


def _ob(tokens: list[int]) -> tinker.ModelInput:
    return tinker.ModelInput(chunks=[tinker.EncodedTextChunk(tokens=tokens)])


_EMPTY = tinker.ModelInput.empty()


class EchoEnv(Env):
    """``turns``-turn env: the next observation is the last one + the action + two feedback
    tokens (the extension property holds); reward 1 per turn. Any action is accepted."""

    def __init__(self, turns: int = TURNS, prompt: Sequence[int] = PROMPT) -> None:
        self.turns = turns
        self.turn = 0
        self.tokens = list(prompt)

    async def initial_observation(self) -> tuple[tinker.ModelInput, StopCondition]:
        return _ob(self.tokens), [2]

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        self.turn += 1
        if self.turn >= self.turns:
            return StepResult(1.0, True, _EMPTY, [2])
        self.tokens = [*self.tokens, *action, *FEEDBACK]
        return StepResult(1.0, False, _ob(self.tokens), [2])


_LOGPROBS = [-0.5] * len(ACTION)


class SleepingCompleter(TokenCompleter):
    """Returns the scripted action after ``asyncio.sleep(delay)``, counting calls in flight."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(
        self, model_input: tinker.ModelInput, stop: StopCondition, *, max_tokens: int | None = None
    ) -> TokensWithLogprobs:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return TokensWithLogprobs(ACTION, _LOGPROBS)


async def bare_rollouts(policy: TokenCompleter, envs: Sequence[Env]) -> list[Trajectory]:
    """The baseline: each env's episode as a plain loop (sample, step, record), one task per env."""

    async def episode(env: Env) -> Trajectory:
        ob, stop = await env.initial_observation()  # type: ignore[misc]
        transitions: list[Transition] = []
        while True:
            ac = await policy(ob, stop)
            result = await env.step(ac.tokens, extra={"stop_reason": ac.stop_reason})
            transitions.append(
                Transition(ob, ac, result.reward, result.episode_done, result.metrics, result.logs)
            )
            ob, stop = result.next_observation, result.next_stop_condition
            if result.episode_done:
                return Trajectory(transitions=transitions, final_ob=ob)

    return list(await asyncio.gather(*(episode(env) for env in envs)))


async def bare_limited_rollouts(policy: TokenCompleter, envs: Sequence[Env], limit: int) -> list[Trajectory]:
    """:func:`bare_rollouts` with its policy calls behind the engine's limiter (an
    ``anyio.Semaphore(limit, fast_acquire=True)``): the plain loop of the wall-vs-ideal workload (the
    same env work and the same hand-off of a call slot, no engine)."""
    slots = anyio.Semaphore(limit, fast_acquire=True)

    async def limited(ob: tinker.ModelInput, stop: StopCondition) -> TokensWithLogprobs:
        async with slots:
            return await policy(ob, stop)

    return await bare_rollouts(limited, envs)  # type: ignore[arg-type]


async def engine_rollouts(
    policy: TokenCompleter, envs: Sequence[Env], group_size: int, config: EngineConfig
) -> list[Trajectory]:
    """The same envs through ``RolloutEngine.run_batch``, in groups of ``group_size``."""
    groups = [envs[i : i + group_size] for i in range(0, len(envs), group_size)]
    builders = [SyntheticGroup(lambda i, g=g: g[i], size=len(g)) for g in groups]
    result = await RolloutEngine(policy, config).run_batch(builders)
    return [t for o in result.outcomes if o.group is not None for t in o.group.trajectories_G]


Side = Callable[[], Coroutine[Any, Any, list[Trajectory]]]


def _timed(side: Side, expected: int) -> tuple[float, float]:
    """Wall time and the loop thread's CPU time of one run, timed inside its event loop:
    ``asyncio.run``'s own set-up and teardown are no part of either side (Python 3.11's teardown
    reprs the main task's result, every trajectory of the batch: more than the engine's cost)."""

    async def run() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.thread_time()
        trajectories = await side()
        wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        assert len(trajectories) == expected, (len(trajectories), expected)
        return wall, cpu

    return asyncio.run(run())


def overhead(
    name: str,
    make_policy: Callable[[], TokenCompleter],
    make_env: Callable[[], Env],
    n_envs: int,
    group_size: int,
    pairs: int,
    config: EngineConfig,
    calls: int,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Alternate engine and bare runs of ``n_envs`` envs (``calls`` policy calls a run); return
    every run's wall time and CPU time per side."""
    sides: dict[str, Side] = {
        "bare": lambda: bare_rollouts(make_policy(), [make_env() for _ in range(n_envs)]),
        "engine": lambda: engine_rollouts(
            make_policy(), [make_env() for _ in range(n_envs)], group_size, config
        ),
    }
    walls: dict[str, list[float]] = {k: [] for k in sides}
    cpus: dict[str, list[float]] = {k: [] for k in sides}
    for side in sides.values():  # warm-up (first-use costs on both sides)
        _timed(side, n_envs)
    for r in range(pairs):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for key in order:
            wall, cpu = _timed(sides[key], n_envs)
            walls[key].append(wall)
            cpus[key].append(cpu)
    print(f"== overhead: {name} ==")
    for key, values in walls.items():
        print(
            f"  {key:6s} wall best {min(values) * 1e3:8.1f} ms, median {statistics.median(values) * 1e3:8.1f} ms;"
            f" loop-thread CPU per call median {statistics.median(cpus[key]) / calls * 1e6:6.1f} us"
            f"   ({len(values)} runs)"
        )
    print(f"  (engine CPU - bare CPU) / bare wall: {_describe(_cpu_bound(walls, cpus))}")
    print(f"  engine wall / bare wall - 1: {_describe(_paired(walls))}")
    return walls, cpus


async def _bare_sleeps(tasks: int, rounds: int, delay: float) -> float:
    """The same critical path with no engine: ``tasks`` tasks, each sleeping ``rounds`` times."""

    async def chain() -> None:
        for _ in range(rounds):
            await asyncio.sleep(delay)

    t0 = time.perf_counter()
    await asyncio.gather(*(chain() for _ in range(tasks)))
    return time.perf_counter() - t0


def wall_vs_ideal(n_groups: int, size: int, repeats: int) -> tuple[list[float], list[float], float]:
    """Engine wall / ideal critical path for ``n_groups x size`` envs at 20 ms per call, limit 64,
    alternating with the bare loop under the same limit (:func:`bare_limited_rollouts`); return
    both sides' ratios and the bare sleeps' ratio."""
    limit, delay = 64, 0.020
    n_envs = n_groups * size
    calls = n_envs * TURNS
    ideal = max(calls * delay / limit, TURNS * delay)
    ratios: dict[str, list[float]] = {"engine": [], "bare": []}  # wall / ideal
    peak = 0
    for r in range(repeats):
        for key in ("engine", "bare") if r % 2 == 0 else ("bare", "engine"):
            policy = SleepingCompleter(delay)
            envs = [EchoEnv() for _ in range(n_envs)]
            if key == "engine":
                config = EngineConfig(max_concurrent_samples=limit)
                wall, _ = _timed(lambda: engine_rollouts(policy, envs, size, config), n_envs)  # noqa: B023
                peak = max(peak, policy.max_in_flight)
            else:
                wall, _ = _timed(lambda: bare_limited_rollouts(policy, envs, limit), n_envs)  # noqa: B023
            ratios[key].append(wall / ideal)
    rounds = round(ideal / delay)
    bare = asyncio.run(_bare_sleeps(min(limit, n_envs), rounds, delay))
    print(f"== wall vs ideal: {n_groups} x {size} envs x {TURNS} turns, 20 ms per call, limit {limit} ==")
    print(
        f"  ideal critical path {ideal:.3f} s; engine wall / ideal: best {min(ratios['engine']):.3f},"
        f" median {statistics.median(ratios['engine']):.3f}; peak in-flight calls {peak}"
    )
    print(
        f"  bare loop under the same limiter: best {min(ratios['bare']):.3f}, median"
        f" {statistics.median(ratios['bare']):.3f} x ideal (the same env work and slot hand-offs, no engine)"
    )
    print(
        f"  bare sleeps on the same critical path: {bare / ideal:.3f} x ideal (the event loop's own lateness)"
    )
    return ratios["engine"], ratios["bare"], bare / ideal


def _sampler_policy() -> Callable[[], TokenCompleter]:
    """A factory of completers over one local sampling client on the tiny model (CPU)."""
    from tinker_cookbook.completers import TinkerTokenCompleter

    from backend import TINY, LocalServiceClient, register_tokenizers

    register_tokenizers()
    client = LocalServiceClient().create_sampling_client(base_model=TINY).result()
    return lambda: TinkerTokenCompleter(client, max_tokens=4, temperature=1.0)  # type: ignore[arg-type]


def measure(args: argparse.Namespace) -> dict[str, object]:
    """Every workload once (``args.pairs`` run pairs at 5 ms, ``args.repeats`` // 2 runs per side
    for the others); the raw figures."""
    gc.collect()
    gc.freeze()  # the import-time heap: a full GC pass must not land inside one side's timing
    n_envs, group_size, ideal_groups = (16, 8, 8) if args.quick else (64, 8, 64)
    out: dict[str, object] = {"engine_root": str(Path(sys.modules["rollout"].__file__ or "").parent)}
    out["5ms"], out["5ms_cpu"] = overhead(
        f"{n_envs} envs x {TURNS} turns, 5 ms per call",
        lambda: SleepingCompleter(0.005),
        EchoEnv,
        n_envs,
        group_size,
        args.pairs,
        EngineConfig(),
        n_envs * TURNS,
    )
    if not args.no_sampler:
        envs, turns = (4, 2) if args.quick else (16, 4)
        out["sampler"], _ = overhead(
            f"{envs} envs x {turns} turns, local sampler on the tiny model (4 tokens per call)",
            _sampler_policy(),
            lambda: EchoEnv(turns),
            envs,
            min(group_size, envs),
            max(1, args.repeats // 2),
            EngineConfig(limits=RolloutLimits(max_turn_tokens=4)),
            envs * turns,
        )
    ratios, bare_limited, bare = wall_vs_ideal(ideal_groups, 8, max(1, args.repeats // 2))
    out["ideal"] = ratios
    out["bare_limited_vs_ideal"] = bare_limited
    out["bare_sleeps_vs_ideal"] = bare
    return out


def _paired(walls: dict[str, list[float]]) -> list[float]:
    """Engine wall / bare wall - 1 of every run pair."""
    return [e / b - 1 for e, b in zip(walls["engine"], walls["bare"], strict=True)]


def _figure(walls: dict[str, list[float]]) -> float:
    """Median over run pairs of engine wall / bare wall, - 1."""
    return statistics.median(_paired(walls))


def _cpu_bound(walls: dict[str, list[float]], cpus: dict[str, list[float]]) -> list[float]:
    """(engine CPU - bare CPU) / bare wall of every run pair: the wall overhead when all of the
    engine's extra CPU on the loop thread is on the critical path."""
    return [(ce - cb) / wb for ce, cb, wb in zip(cpus["engine"], cpus["bare"], walls["bare"], strict=True)]


def _interval(values: list[float], resamples: int = 2000) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median of ``values`` (a fixed seed)."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def _describe(values: list[float]) -> str:
    """The median of per-pair ``values`` with its interval and the values' quartiles."""
    lo, hi = _interval(values)
    text = f"{statistics.median(values):+.4f} (median of {len(values)} pairs; 95% interval [{lo:+.4f}, {hi:+.4f}]"
    if len(values) >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4)
        text += f"; pairs' quartiles [{q1:+.4f}, {q3:+.4f}]"
    return text + ")"


def compare(args: argparse.Namespace) -> None:
    """This checkout and every ``args.compare`` checkout in turn, one subprocess per side and
    round (the order rotates each round, so a change of load hits every side alike)."""
    roots = {"this checkout": _HERE}
    for extra in args.compare:
        roots[str(Path(extra).resolve())] = Path(extra).resolve()
    labels = list(roots)
    results: dict[str, list[dict[str, object]]] = {k: [] for k in roots}
    for r in range(args.rounds):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            cmd = [sys.executable, __file__, "--engine-root", str(roots[label]), "--json"]
            cmd += ["--repeats", str(args.repeats), "--pairs", str(args.pairs)]
            cmd += ["--quick"] if args.quick else []
            cmd += ["--no-sampler"] if args.no_sampler else []
            load = os.getloadavg()[0]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
            results[label].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"  round {r + 1} {label}: done (load average {load:.1f} -> {os.getloadavg()[0]:.1f})")
    for label, runs in results.items():
        merged = {
            key: {side: [w for run in runs for w in run[key][side]] for side in ("bare", "engine")}  # type: ignore[index]
            for key in ("5ms", "sampler")
            if key in runs[0]
        }
        ideal = [x for run in runs for x in run["ideal"]]  # type: ignore[union-attr]
        floor = [x for run in runs for x in run.get("bare_limited_vs_ideal", [])]  # type: ignore[union-attr]
        cpus = {side: [c for run in runs for c in run["5ms_cpu"][side]] for side in ("bare", "engine")}  # type: ignore[index]
        bound = _cpu_bound(merged["5ms"], cpus)
        lo, hi = _interval(bound)
        line = f"{label}: engine_overhead_vs_bare_5ms={statistics.median(bound):.4f} [{lo:+.4f}, {hi:+.4f}]"
        line += f" engine_wall_overhead_5ms={_figure(merged['5ms']):.4f}"
        if "sampler" in merged:
            line += f" engine_overhead_vs_bare_sampler={_figure(merged['sampler']):.4f}"
        line += f" ratio_wall_vs_ideal={min(ideal):.3f} (median {statistics.median(ideal):.3f})"
        if floor:
            line += f" bare_limited_vs_ideal={min(floor):.3f} (median {statistics.median(floor):.3f})"
        print(line + f" (engine: {runs[0]['engine_root']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--repeats", type=int, default=6, help="runs per side: half of it for workloads 2 and 3"
    )
    parser.add_argument("--pairs", type=int, default=80, help="run pairs (engine, bare) at 5 ms")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat (smoke run)")
    parser.add_argument("--no-sampler", action="store_true", help="skip the local-sampler figure")
    parser.add_argument("--engine-root", help="measure the rollout package of this checkout")
    parser.add_argument("--compare", metavar="DIR", nargs="+", help="alternate this checkout and each DIR")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per side with --compare")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.repeats = args.pairs = 1
    load = os.getloadavg()
    if not args.json:
        print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    if args.compare:
        compare(args)
        return
    figures = measure(args)
    if args.json:
        print(json.dumps(figures))
        return
    print(f"engine under test: {figures['engine_root']}")
    if "sampler" in figures:
        print(f"engine_overhead_vs_bare_sampler={_figure(figures['sampler']):.4f}")  # type: ignore[arg-type]
    walls, cpus = figures["5ms"], figures["5ms_cpu"]
    bound = _cpu_bound(walls, cpus)  # type: ignore[arg-type]
    lo, hi = _interval(bound)
    wall_lo, wall_hi = _interval(_paired(walls))  # type: ignore[arg-type]
    print(
        f"engine_overhead_vs_bare_5ms_interval={lo:.4f},{hi:.4f}"
        f" engine_wall_overhead_5ms={_figure(walls):.4f}"  # type: ignore[arg-type]
        f" engine_wall_overhead_5ms_interval={wall_lo:.4f},{wall_hi:.4f}"
        f" bare_limited_vs_ideal={min(figures['bare_limited_vs_ideal']):.3f}"  # type: ignore[arg-type]
        f" bare_sleeps_vs_ideal={figures['bare_sleeps_vs_ideal']:.3f}"
    )
    print(
        f"engine_overhead_vs_bare_5ms={statistics.median(bound):.4f}"
        f" ratio_wall_vs_ideal={min(figures['ideal']):.3f}"  # type: ignore[arg-type]
    )


if __name__ == "__main__":
    main()
