"""Bench: group rollouts in-process, on a process pool and on Ray actors (training._executors).

    .venv/bin/python bench/executor.py [--quick] [--workers 2] [--repeats 3]

1. Same datums: a parity batch (the toy env of ``training.testing``, TINY model, a saved LoRA
   checkpoint, one seed) in-process, on ``process:N`` and on ``ray:local:N``: every datum must be
   the same (``identical_datums``).
2. Faults: the same batch with two groups that SIGKILL their worker once (``KillWorkerOnce``), on
   the pool and on the Ray actors: ``workers_killed`` counts kills that happened, ``groups_lost``
   the groups missing, failed or differing from the in-process batch (goal 0 with k >= 2).
3. Latency-bound: 1,024 concurrent episodes (128 groups of 8), 4 turns, every env step waits
   50 ms, the policy a fake sampler that answers at once: wall time of a batch on warm Ray actors
   over in-process (``ratio_latency_bound_ray_vs_inprocess``, goal <= 1.10): what sending builders
   out and trajectories back costs where the work is waiting.
4. Sandbox: 256 episodes of ``envs.code`` (a scripted policy: one ``run_python`` call, then the
   answer), real sandbox runs: Ray over in-process (``ratio_sandbox_ray_vs_inprocess``, printed;
   on one machine the sandbox's processes share its cores either way).

Timings are the median of ``--repeats`` batches, in-process and Ray alternating, after one warm-up
batch each (actors are long-lived: their samplers and sandboxes stay warm; the cluster's start, paid
once per run, is printed apart). Every batch is built fresh and starts after an untimed
``gc.collect()``, so neither way pays for the other's garbage (see ``_timed``). ``--quick``: a few
groups, 1 repeat, Ray only (the pool's parity and faults are tests/test_executors.py's); its
figures only prove the script works.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import anyio
from tinker_cookbook.renderers import ToolCall

from backend import LocalServiceClient
from backend.model import SMOLLM2, register_tokenizers
from rollout.testing import SyntheticEnv, SyntheticGroup
from training._executors import (
    ClientSampler,
    ProcessExecutor,
    RayExecutor,
    RolloutExecutor,
    WorkerSampler,
    saved_sampler,
)
from training._rollouts import SampledBatch, sample_batch, to_datums
from training.testing import TINY_MODEL, KillWorkerOnce, parity_builders


@dataclass
class _Seq:
    tokens: list[int]
    logprobs: list[float]
    stop_reason: str = "stop"


@dataclass
class _Response:
    sequences: list[_Seq]


@dataclass
class FakeSampler:
    """A sampling client that answers at once: ``first`` until the prompt holds ``mark`` (a
    token run of ``first``: it was said), then ``then``."""

    first: list[int]
    then: list[int] = field(default_factory=list)
    mark: list[int] = field(default_factory=list)

    async def sample_async(self, prompt: Any, num_samples: int, sampling_params: Any) -> _Response:
        tokens = self.then if self.mark and _holds(prompt.to_ints(), self.mark) else self.first
        return _Response([_Seq(list(tokens), [0.0] * len(tokens))])


def _holds(ints: list[int], run: list[int]) -> bool:
    n = len(run)
    return any(ints[i : i + n] == run for i in range(len(ints) - n + 1))


def _run(
    builders: list[Any], client: Any, worker: WorkerSampler, executor: RolloutExecutor | None
) -> SampledBatch:
    return anyio.run(
        lambda: sample_batch(
            builders,
            client,
            max_tokens=64,
            temperature=1.0,
            sampler_step=0,
            seed=11,
            executor=executor,
            worker_sampler=worker,
        )
    )


def _datums(batch: SampledBatch) -> list[Any]:
    out, _ = to_datums(batch.groups)
    return [
        (d.model_input.to_ints(), {k: v.tolist() for k, v in sorted(d.loss_fn_inputs.items())}) for d in out
    ]


def _lost(batch: SampledBatch, reference: SampledBatch) -> int:
    """Groups of ``reference`` missing from ``batch`` or different in it (plus extra ones)."""
    key = [json.dumps(_datums(_one(g))) for g in reference.groups]
    got = [json.dumps(_datums(_one(g))) for g in batch.groups]
    return sum(1 for a, b in zip(key, got, strict=False) if a != b) + abs(len(key) - len(got)) + batch.failed


def _one(group: Any) -> SampledBatch:
    return SampledBatch(builders=[], groups=[group], sampler_step=0, seconds=0.0)


def _timed(
    builders: Callable[[], list[Any]], client: Any, worker: WorkerSampler, ray: RayExecutor, repeats: int
) -> float:
    """Median wall time of Ray over in-process, alternating, after a warm-up of each.

    Every batch gets fresh builders (a trainer's come fresh from its dataset each step; the test
    builders also keep every env they made, which a reused one would ship to the actors again)
    and starts with the garbage collector's debts paid (``gc.collect()``, untimed): both ways run
    in this one process, and a full collection owed to one way's garbage must not land in the
    other's time."""
    here, there = [], []
    for i in range(repeats + 1):
        times = []
        for executor in (None, ray):
            batch = builders()
            gc.collect()
            t = time.perf_counter()
            _run(batch, client, worker, executor)
            times.append(time.perf_counter() - t)
        if i:
            here.append(times[0])
            there.append(times[1])
    print(f"  in-process {statistics.median(here):.3f}s  ray {statistics.median(there):.3f}s", flush=True)
    return statistics.median(there) / statistics.median(here)


def _latency_builders(episodes: int) -> list[Any]:
    factory = partial(SyntheticEnv, turns=4, delay_s=0.05)
    return [SyntheticGroup(lambda _i, f=factory: f(), size=8) for _ in range(episodes // 8)]


def _sandbox_case(episodes: int) -> tuple[list[Any], FakeSampler]:
    from envs.code import CodeEnvConfig, ToolFormat
    from envs.code.builders import CodeGroupBuilder
    from envs.math import MathProblem
    from renderers_ext import load_renderer, render_action

    register_tokenizers()
    config = CodeEnvConfig(tool_format=ToolFormat.TOOL, fewshot=False, max_tool_calls=1)
    renderer = load_renderer(None, SMOLLM2)
    call = ToolCall(
        function=ToolCall.FunctionBody(name="run_python", arguments=json.dumps({"code": "print(6*7)"}))
    )
    calls = render_action(renderer, {"role": "assistant", "content": "", "tool_calls": [call]})
    answer = render_action(renderer, {"role": "assistant", "content": "It is \\boxed{42}."})
    builders = [
        CodeGroupBuilder(
            MathProblem(f"What is 6 * 7? (case {i})", "42"),
            config.math_config(),
            8,
            model_name_for_tokenizer=SMOLLM2,
            code_config=config,
        )
        for i in range(episodes // 8)
    ]
    calls, answer = list(calls), list(answer)
    return builders, FakeSampler(calls, answer, calls[len(calls) // 3 : 2 * len(calls) // 3])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few groups, one repeat (tests)")
    parser.add_argument("--workers", type=int, default=2, help="pool processes and Ray actors")
    parser.add_argument("--repeats", type=int, default=3, help="timed batches per way (median)")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    groups = 4 if args.quick else 16
    latency_episodes = 64 if args.quick else 1024
    sandbox_episodes = 16 if args.quick else 256
    tmp = Path(tempfile.mkdtemp(prefix="bench_executor_"))

    async def tiny() -> tuple[Any, WorkerSampler]:
        service = LocalServiceClient(tmp / "ckpt", seed=0)
        trainer = await service.create_lora_training_client_async(TINY_MODEL, rank=4, seed=0)
        return await saved_sampler(trainer, service, 0)

    client, worker = anyio.run(tiny)
    reference = _run(parity_builders(groups), client, worker, None)
    t0 = time.perf_counter()
    pool = None if args.quick else ProcessExecutor(args.workers)
    ray = RayExecutor(args.workers, "local")
    print(f"ray:local:{args.workers} up in {time.perf_counter() - t0:.1f}s", flush=True)
    ways: list[tuple[str, RolloutExecutor]] = (
        [("ray", ray)] if pool is None else [("process", pool), ("ray", ray)]
    )
    try:
        identical = True
        killed = lost = 0
        for name, executor in ways:
            t0 = time.perf_counter()
            same = _datums(_run(parity_builders(groups), client, worker, executor)) == _datums(reference)
            builders: list[Any] = parity_builders(groups)
            markers = [tmp / f"{name}_kill_{i}" for i in range(2)]
            for i, marker in enumerate(markers):
                builders[i] = KillWorkerOnce(builders[i], str(marker), os.getpid())
            faulted = _run(builders, client, worker, executor)
            killed += sum(m.exists() for m in markers)
            lost += _lost(faulted, reference)
            identical = identical and same and _datums(faulted) == _datums(reference)
            print(
                f"{name}: same datums {same}, workers lost {executor.workers_lost} "
                f"({time.perf_counter() - t0:.1f}s)",
                flush=True,
            )
        if pool is not None:
            pool.close()

        print(f"latency-bound: {latency_episodes} episodes x 4 steps of 50 ms", flush=True)
        fake = FakeSampler([7, 8, 2])
        r = _timed(partial(_latency_builders, latency_episodes), fake, ClientSampler(fake), ray, repeats)
        print(f"sandbox: {sandbox_episodes} code episodes", flush=True)
        _, scripted = _sandbox_case(sandbox_episodes)
        s = _timed(
            lambda: _sandbox_case(sandbox_episodes)[0], scripted, ClientSampler(scripted), ray, repeats
        )
    finally:
        if pool is not None:
            pool.close()
        ray.close()
    print(
        f"identical_datums={int(identical)} workers_killed={killed} groups_lost={lost} "
        f"ratio_latency_bound_ray_vs_inprocess={r:.3f} ratio_sandbox_ray_vs_inprocess={s:.3f}"
    )


if __name__ == "__main__":
    main()
