"""The Ray executor on a local cluster these tests start and stop (TINY model).

Same datums as in-process on the same seed; long-lived actors (the same processes serve every
batch); an actor SIGKILLed mid-batch is replaced and its groups rerun (nothing lost or
duplicated); closing stops the cluster it started. One cluster for the module: its start is most
of the cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from executor_checks import datums, killing_batch, run, seed_drawn, tiny_sampler, untimed

from training._executors import RayExecutor
from training.testing import parity_builders

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def sampler(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return tiny_sampler(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayExecutor]:
    assert not ray.is_initialized()
    executor = RayExecutor(2, "local")
    try:
        yield executor
    finally:
        executor.close()
        assert not ray.is_initialized(), "the local cluster was left running"


def test_ray_actors_give_the_in_process_datums_and_stay_warm(sampler: Any, cluster: RayExecutor) -> None:
    (node,) = ray.nodes()
    assert node["NodeManagerAddress"] == "127.0.0.1"  # ray:local listens on this machine only
    builders = parity_builders(4)
    here = run(builders, sampler, None)
    pids = anyio.run(cluster.pids)
    there = run(builders, sampler, cluster)
    assert datums(there) == datums(here) and datums(here)
    assert untimed(there.metrics) == untimed(here.metrics)
    assert datums(run(builders, sampler, cluster)) == datums(here)
    assert anyio.run(cluster.pids) == pids  # the same two actors served both batches


def test_actors_killed_mid_batch_are_replaced_and_lose_nothing(cluster: RayExecutor, tmp_path: Path) -> None:
    sampler = seed_drawn()  # the fresh actors load no weights: reruns are what is checked
    builders, markers = killing_batch(tmp_path)
    here = run(parity_builders(4), sampler, None)
    pids = anyio.run(cluster.pids)
    there = run(builders, sampler, cluster)
    assert all(m.exists() for m in markers)
    assert cluster.workers_lost >= 2  # one actor per killing group (round-robin chunks)
    assert there.failed == 0
    assert datums(there) == datums(here) and datums(here)
    assert set(anyio.run(cluster.pids)).isdisjoint(pids)  # both slots hold fresh actors
