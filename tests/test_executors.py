"""Rollout executors (training._executors): the spec, the process pool, the cookbook's seam.

The pool's workers build the envs from pickled builders and sample from a saved TINY checkpoint;
the datums must equal the in-process ones on the same seed, also when workers are SIGKILLed
mid-batch (their groups rerun, nothing lost or duplicated). Ray: tests/test_executors_ray.py.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from executor_checks import datums, killing_batch, run, seed_drawn, tiny_sampler, untimed
from tinker_cookbook.rl.rollouts import set_rollout_executor

import training
from rollout import BatchAborted, EngineConfig, Strategy
from training._config import ExecutorSpec
from training._executors import FuturesExecutor, ProcessExecutor, open_executor
from training._logging import read_rows
from training._rollouts import SeededTokenCompleter
from training.testing import KillWorkerOnce, ToyConfig, parity_builders


def test_the_spec_reads_every_form_and_refuses_others_in_one_line() -> None:
    assert ExecutorSpec.parse("inprocess") == ExecutorSpec()
    assert ExecutorSpec.parse("process:3") == ExecutorSpec("process", 3)
    assert ExecutorSpec.parse("ray:local:2") == ExecutorSpec("ray", 2, "local")
    assert ExecutorSpec.parse("ray:auto").address == "auto"
    for bad in ("process", "process:0", "thread:2", "ray:cluster", "ray:local:x", ""):
        with pytest.raises(ValueError, match="bad rollout_executor") as err:
            ExecutorSpec.parse(bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="bad rollout_executor"):
        ToyConfig(rollout_executor="process:-1")


@pytest.fixture(scope="module")
def sampler(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return tiny_sampler(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessExecutor]:
    executor = ProcessExecutor(2)
    try:
        yield executor
    finally:
        executor.close()


def test_a_process_pool_gives_the_in_process_datums(sampler: Any, pool: ProcessExecutor) -> None:
    builders = parity_builders(4)
    here = run(builders, sampler, None)
    there = run(builders, sampler, pool)
    assert datums(there) == datums(here) and datums(here)
    assert untimed(there.metrics) == untimed(here.metrics)
    assert [b is a for a, b in zip(builders, there.builders, strict=True)] == [True] * 4


def test_workers_killed_mid_batch_lose_and_duplicate_nothing(pool: ProcessExecutor, tmp_path: Path) -> None:
    sampler = seed_drawn()  # the fresh pool's workers load no weights: reruns are what is checked
    builders, markers = killing_batch(tmp_path)
    here = run(parity_builders(4), sampler, None)
    lost_before = pool.workers_lost
    there = run(builders, sampler, pool)
    assert all(m.exists() for m in markers)  # both kills happened
    assert pool.workers_lost > lost_before
    assert there.failed == 0
    assert datums(there) == datums(here) and datums(here)
    assert datums(run(parity_builders(4), sampler, pool)) == datums(here)  # the healed pool still works


class _KillAlways(KillWorkerOnce):
    async def make_envs(self) -> Any:
        if os.getpid() != self.trainer_pid:
            os.kill(os.getpid(), signal.SIGKILL)
        return await self.inner.make_envs()


def test_a_group_whose_worker_always_dies_is_reported_per_the_strategy() -> None:
    executor = ProcessExecutor(1)
    executor.max_reruns = 0
    try:
        builder = _KillAlways(parity_builders(1)[0], "", os.getpid())
        _, worker = seed_drawn()

        async def batch(strategy: Strategy) -> Any:
            policy = functools.partial(SeededTokenCompleter, max_tokens=4)
            return await executor.run_batch([builder], worker, policy, EngineConfig(strategy=strategy))

        result = anyio.run(batch, Strategy.retry(1))
        (outcome,) = result.outcomes
        assert outcome.group is None and outcome.failure is not None
        assert outcome.failure.error_type == "WorkerLost"
        assert executor.workers_lost == 1
        with pytest.raises(BatchAborted):
            anyio.run(batch, Strategy.fail_fast(abort_batch=True))
    finally:
        executor.close()


def test_the_cookbook_seam_is_honoured() -> None:
    assert open_executor("inprocess") is None
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"))
    set_rollout_executor(pool)
    try:
        wrapped = open_executor("inprocess")
        assert isinstance(wrapped, FuturesExecutor) and wrapped.executor is pool and wrapped.workers == 2
    finally:
        set_rollout_executor(None)
        pool.shutdown()


def _rows(path: Path, name: str) -> list[dict[str, Any]]:
    """Rows without timings and the trainer's own sampler counters (workers sample, not it)."""
    return [
        {k: v for k, v in r.items() if "time" not in k and "per_second" not in k and "sampler/" not in k}
        for r in read_rows(path / name)
    ]


def test_the_loop_on_a_process_pool_matches_the_in_process_run(tmp_path: Path) -> None:
    # One worker: the loop's wiring (a checkpoint per step, metrics, transcripts) is checked here;
    # batches split over several workers are test_a_process_pool_gives_the_in_process_datums's.
    runs = {}
    for spec in ("inprocess", "process:1"):
        log = tmp_path / spec.replace(":", "_")
        training.train(
            ToyConfig(
                log_path=str(log), max_steps=2, eval_every=1, seed=3, progress=False, rollout_executor=spec
            )
        )
        runs[spec] = log
    a, b = runs["inprocess"], runs["process:1"]
    for name in ("metrics.jsonl", "eval.jsonl"):
        assert _rows(b, name) == _rows(a, name) and _rows(a, name)
    transcripts = {p.name: p.read_text() for p in sorted((a / "transcripts").glob("*.html"))}
    assert transcripts and transcripts == {
        p.name: p.read_text() for p in sorted((b / "transcripts").glob("*.html"))
    }
    saved = list(b.glob("checkpoints/*/sampler_weights/executor_*"))
    assert 1 <= len(saved) <= 2  # older steps' sampler weights are pruned
