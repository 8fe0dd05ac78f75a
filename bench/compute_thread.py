"""Benchmark: the local backend's work on one compute thread vs with a second OpenMP thread pool.

The local backend runs all of its torch work on one thread (``backend.local._device``), because
GNU OpenMP (the runtime of PyTorch's CPU wheels) slows every thread down once pools of several
threads together hold more threads than the machine has cores: idle helpers then sleep after ~100
spins, so each parallel op pays a wake-up. Before, the trainer, each sampling engine and client
creation had threads of their own, i.e. several pools.

This times the main job's two workloads on SmolLM2-135M (compute dtype ``auto``), side by side in
one run, alternating the two conditions:

- **train**: one ``forward_backward`` (importance sampling, 40 datums of 90-190 tokens, the
  advantages on the last 30 tokens, as a Twenty Questions RL step) and one ``optim_step``;
- **sample**: 8 prompts x 8 samples of 24 tokens at temperature 0.8 on a fresh engine;

- ``one pool``: only the compute thread has run parallel ops (the backend as it ships);
- ``two pools``: another thread has run one parallel op (a 512 x 512 product) and is still alive
  (as the trainer's or a sampler's thread was, before); it exits afterwards, which frees its pool.

Run: ``nice .venv/bin/python bench/compute_thread.py [--quick]`` (``--quick``: the tiny test model,
a small batch, one round; no figure to compare). It imports the backend before
torch, as the main job does, so libgomp spins as the backend ships (``GOMP_SPINCOUNT=10000``,
``backend/_openmp.py``); ``GOMP_SPINCOUNT=300000`` in the environment gives libgomp's default. With
more pool threads than cores libgomp spins 100 times either way. The last line is
``ratio_train_two_vs_one_pool=<x> ratio_sample_two_vs_one_pool=<y>`` (seconds with a second
pool over seconds with one: how much slower the old layout was).

The figures measured so far are in ``docs/measurements.md``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# backend before torch, as the main job imports it: it sets GOMP_SPINCOUNT (backend/_openmp.py).
from backend import SMOLLM2, TINY, LocalServiceClient, LocalTrainingClient, load_tokenizer  # noqa: I001
import torch
from tinker import types


class SecondPool:
    """A thread that runs one parallel op (so OpenMP gives it a pool) and waits until closed."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        ready = threading.Event()

        def run() -> None:
            a = torch.randn(512, 512)
            _ = a @ a
            ready.set()
            self._stop.wait()

        self._thread = threading.Thread(target=run, name="second-pool", daemon=True)
        self._thread.start()
        ready.wait()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def rl_batch(seed: int = 0, datums: int = 40) -> list[types.Datum]:
    rng = random.Random(seed)
    data = []
    for _ in range(datums):
        n = rng.randrange(90, 190)
        tokens = [rng.randrange(1000, 20000) for _ in range(n)]
        adv = [0.0] * (n - 30) + [rng.choice([-0.5, 0.5]) for _ in range(30)]
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens),
                loss_fn_inputs={
                    "target_tokens": types.TensorData(data=tokens, dtype="int64", shape=[n]),
                    "logprobs": types.TensorData(data=[-1.0] * n, dtype="float32", shape=[n]),
                    "advantages": types.TensorData(data=adv, dtype="float32", shape=[n]),
                },
            )
        )
    return data


def time_train(trainer: LocalTrainingClient, data: list[types.Datum]) -> float:
    t0 = time.perf_counter()
    trainer.forward_backward(data, "importance_sampling").result()
    trainer.optim_step(types.AdamParams(learning_rate=1e-5)).result()
    return time.perf_counter() - t0


def time_sample(trainer: LocalTrainingClient, prompts: list[types.ModelInput], samples: int = 8) -> float:
    sampler = trainer.save_weights_and_get_sampling_client().result()
    params = types.SamplingParams(max_tokens=24, temperature=0.8, stop=[], seed=None)
    t0 = time.perf_counter()
    futures = [sampler.sample(p, samples, params) for p in prompts]
    for f in futures:
        f.result()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--quick",
        action="store_true",
        help="the tiny test model, 4 datums, 2 x 4 samples, one round (a smoke run)",
    )
    args = ap.parse_args()
    rounds, model, n_datums, n_prompts, samples = (1, TINY, 4, 2, 4) if args.quick else (3, SMOLLM2, 40, 8, 8)

    service = LocalServiceClient(compute_dtype="auto", seed=0)
    trainer = service.create_lora_training_client(model, rank=16, seed=0).result()
    tok = load_tokenizer()
    prompts = [
        types.ModelInput.from_ints(tok.encode(f"Think of a word. Clue {i}: it is in the kitchen. Guess?"))
        for i in range(n_prompts)
    ]
    data = rl_batch(datums=n_datums)
    print(
        f"compute dtype {service.compute_dtype}, {torch.get_num_threads()} threads, "
        f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '(libgomp default)')}, "
        f"{sum(d.model_input.length for d in data)} training tokens, {n_prompts * samples} x 24 sampled tokens"
    )
    time_train(trainer, data)  # warm-up: first-call allocations, kernel selection
    time_sample(trainer, prompts, samples)

    best: dict[tuple[str, str], float] = {}
    for r in range(rounds):
        for condition in ("one pool", "two pools"):
            extra = SecondPool() if condition == "two pools" else None
            try:
                train_s = time_train(trainer, data)
                sample_s = time_sample(trainer, prompts, samples)
            finally:
                if extra is not None:
                    extra.close()
            print(f"round {r}  {condition:9s}  train {train_s:6.2f} s  sample {sample_s:6.2f} s")
            for kind, s in (("train", train_s), ("sample", sample_s)):
                best[kind, condition] = min(best.get((kind, condition), float("inf")), s)

    for kind in ("train", "sample"):
        print(
            f"{kind:6s} best: one pool {best[kind, 'one pool']:.2f} s, two pools {best[kind, 'two pools']:.2f} s"
        )
    print(
        f"ratio_train_two_vs_one_pool={best['train', 'two pools'] / best['train', 'one pool']:.2f} "
        f"ratio_sample_two_vs_one_pool={best['sample', 'two pools'] / best['sample', 'one pool']:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
