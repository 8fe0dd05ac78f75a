"""Where group rollouts run: in the trainer's process, in a pool of worker processes, or on Ray actors.

An executor takes the plain groups of a batch, splits them into one chunk per worker and runs each
chunk in its worker with the same engine the trainer would use (``RolloutEngine.run_group`` at the
group's own batch index, so seeded calls (``rollout.SampleCall``) sample the same tokens wherever
they run). What crosses to the worker (cloudpickle): the builders, the ``EngineConfig``, the
sampling settings and a :data:`WorkerSampler` (how the worker reaches the policy: the trainer's
``local://`` checkpoint of this step for the embedded backend, loaded once per worker per path, or
a Tinker ``SamplingClient``, which pickles). What comes back: ``rollout.GroupOutcome`` s, rebuilt
into the parent's own builders, so the loop sees what an in-process batch gives.

Workers are long-lived (one pool or one set of actors per run): whatever a worker builds once
(a sampler, a sandbox pool, a judge client held at module level) stays warm across batches.

A worker that dies mid-batch (SIGKILL, OOM) loses the chunks it was running: they are run again
on a fresh worker (the same places, so the same samples: no datum lost or duplicated), at most
:attr:`RolloutExecutor.max_reruns` times; past that its groups fail with :class:`WorkerLost` and
are reported like any failed group (``abort_batch`` strategies raise ``rollout.BatchAborted``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import multiprocessing
import os
import pickle
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import cloudpickle
from tinker_cookbook.completers import TokenCompleter
from tinker_cookbook.rl.types import EnvGroupBuilder

from rollout import BatchAborted, BatchResult, EngineConfig, GroupOutcome, RolloutEngine, summarize
from rollout._results import error_of
from training._config import ExecutorSpec


class WorkerLost(RuntimeError):
    """The worker running a group died before returning it (killed, out of memory)."""


# ---------------------------------------------------------------------------- samplers in workers
@dataclass(frozen=True)
class LocalCheckpointSampler:
    """The embedded backend's sampler on a saved ``local://`` checkpoint, built in the worker."""

    path: str
    """Absolute ``local://`` path of the sampler weights."""
    compute_dtype: str
    seed: int | None
    max_batch_size: int
    prefix_cache_tokens: int

    def open(self) -> Any:
        """The sampling client (built once per worker per path; the last two are kept)."""
        client = _OPEN.get(self.path)
        if client is None:
            from backend import LocalServiceClient

            service = LocalServiceClient(
                max_batch_size=self.max_batch_size,
                prefix_cache_tokens=self.prefix_cache_tokens,
                compute_dtype=self.compute_dtype,
                seed=self.seed,
            )
            client = service.create_sampling_client(model_path=self.path).result()
            _OPEN[self.path] = client
            while len(_OPEN) > 2:
                _OPEN.pop(next(iter(_OPEN)))
        return client


@dataclass(frozen=True)
class ClientSampler:
    """A sampling client that pickles as it is (a Tinker service's ``SamplingClient``)."""

    client: Any

    def open(self) -> Any:
        """The client itself."""
        return self.client


WorkerSampler = LocalCheckpointSampler | ClientSampler
"""How a worker reaches the policy of a batch."""

_OPEN: dict[str, Any] = {}
"""The samplers this worker process has built, by checkpoint path (oldest first)."""


def worker_sampler_of(client: Any) -> WorkerSampler:
    """The :data:`WorkerSampler` of a sampling client that workers can reach on their own: a
    Tinker client (pickled). An embedded-backend client needs its weights saved first
    (:func:`saved_sampler`); one that is not raises ``ValueError``."""
    if type(client).__name__ == "LocalSamplingClient":
        raise ValueError(
            "an executor needs the embedded sampler saved to a local:// checkpoint: "
            "get it with training._executors.saved_sampler"
        )
    return ClientSampler(client)


async def saved_sampler(
    training_client: Any, service: Any, step: int, *, keep: int = 2
) -> tuple[Any, WorkerSampler]:
    """This step's sampling client and the way workers reach it.

    On the embedded backend the weights are saved as ``local://…/sampler_weights/executor_<step>``
    and the trainer's own client is built from that checkpoint too (same weights, same samples);
    earlier ``executor_*`` checkpoints beyond the ``keep`` newest are removed. On a Tinker service
    the snapshot client is used and pickled as it is.
    """
    if type(service).__name__ != "LocalServiceClient":
        client = await training_client.save_weights_and_get_sampling_client_async()
        return client, ClientSampler(client)
    from backend.local import _checkpoint as ckpt

    name = f"executor_{step:06d}"
    saved = await training_client.save_weights_for_sampler(name).result_async()
    folder = ckpt.resolve(saved.path, service.root)
    path = f"{ckpt.CHECKPOINT_SCHEME}{folder.resolve()}"
    client = await service.create_sampling_client_async(model_path=path)
    for old in sorted(folder.parent.glob("executor_*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return client, LocalCheckpointSampler(
        path=path,
        compute_dtype=service.compute_dtype,
        seed=service.seed,
        max_batch_size=service.max_batch_size,
        prefix_cache_tokens=service.prefix_cache_tokens,
    )


# ---------------------------------------------------------------------------- the worker side
@dataclass(frozen=True)
class Chunk:
    """The groups one worker runs in one call, and everything it needs to run them."""

    groups: tuple[tuple[int, EnvGroupBuilder], ...]
    """(index in the batch, builder)."""
    sampler: WorkerSampler
    policy: Callable[[Any], TokenCompleter]
    """The policy on a sampling client (``training.SeededTokenCompleter`` with the batch's
    ``max_tokens`` and temperature, as ``sample_batch`` makes it)."""
    config: EngineConfig


async def run_chunk(chunk: Chunk) -> list[GroupOutcome]:
    """Run a chunk's groups concurrently with the engine (in whatever process calls it)."""
    engine = RolloutEngine(chunk.policy(chunk.sampler.open()), chunk.config)
    outcomes: list[GroupOutcome | None] = [None] * len(chunk.groups)

    async def one(k: int) -> None:
        index, builder = chunk.groups[k]
        outcomes[k] = await engine.run_group(builder, index)

    async with anyio.create_task_group() as tg:
        for k in range(len(chunk.groups)):
            tg.start_soon(one, k)
    # The trainer holds the builders: they need not travel back (it puts its own in).
    return [dataclasses.replace(o, builder=cast(Any, None)) for o in outcomes if o is not None]


def run_chunk_blob(blob: bytes) -> bytes:
    """Process-pool entry point: a cloudpickled :class:`Chunk` in (cloudpickle, so builders
    defined in functions or notebooks travel too), its outcomes out as :func:`dump_outcomes` bytes."""
    chunk: Chunk = cloudpickle.loads(blob)
    return dump_outcomes(anyio.run(run_chunk, chunk))


def dump_outcomes(outcomes: list[GroupOutcome]) -> bytes:
    """A chunk's outcomes as bytes for the way back: the standard pickler (about twice as fast as
    cloudpickle on trajectories: plain data of importable classes), cloudpickle for the rare
    outcome that holds something only it can pickle (a class defined in a function)."""
    try:
        return pickle.dumps(outcomes, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return cloudpickle.dumps(outcomes)


def load_outcomes(blob: bytes) -> list[GroupOutcome]:
    """The outcomes of :func:`dump_outcomes`, unpickled with the garbage collector paused: an
    unpickle makes hundreds of thousands of objects at once (a 1,024-episode batch), and the
    collections they would trigger (up to a full one over the trainer's whole heap) find nothing."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return pickle.loads(blob)
    finally:
        if paused:
            gc.enable()


class _RayWorker:
    """A Ray actor running chunks (async: several at once on its event loop)."""

    def __init__(self) -> None:
        self._modules = 0
        self._freeze()

    def _freeze(self) -> None:
        # The code this actor has imported (Ray, torch, the cookbook: ~250k objects; then what its
        # chunks import: a sampler's transformers, an env's own) lives as long as the actor:
        # frozen, the collector's full passes during chunks do not walk it again each time.
        if len(sys.modules) != self._modules:
            self._modules = len(sys.modules)
            gc.collect()
            gc.freeze()

    async def run(self, chunk: Chunk) -> bytes:
        outcomes = await run_chunk(chunk)
        self._freeze()  # again after a chunk that imported code (the first ones)
        return dump_outcomes(outcomes)

    def pid(self) -> int:
        return os.getpid()


# ---------------------------------------------------------------------------- the trainer side
class RolloutExecutor:
    """Runs the plain groups of a batch in workers; subclasses say how a chunk reaches one."""

    max_reruns: int = 2
    """Times a chunk is run again after its worker died, before its groups are reported lost."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.workers_lost = 0
        """Workers that died under a chunk (since this executor opened)."""

    async def _submit(self, slot: int, chunk: Chunk) -> list[GroupOutcome]:
        """Run ``chunk`` on the worker of ``slot``; :class:`WorkerLost` when it died."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the workers (idempotent)."""

    async def run_batch(
        self,
        builders: Sequence[EnvGroupBuilder],
        sampler: WorkerSampler,
        policy: Callable[[Any], TokenCompleter],
        config: EngineConfig,
        *,
        indices: Sequence[int] | None = None,
    ) -> BatchResult:
        """Every group of ``builders`` (at ``indices`` in the batch; default their positions), as
        ``RolloutEngine(policy(sampler's client), config).run_batch`` returns them: outcomes in
        builder order, summarized. ``policy`` must pickle (a class or a ``functools.partial``)."""
        t0 = time.monotonic()
        indices = list(range(len(builders))) if indices is None else list(indices)
        n_chunks = min(self.workers, len(builders))
        chunks = [
            Chunk(
                tuple((indices[i], builders[i]) for i in range(k, len(builders), n_chunks)),
                sampler,
                policy,
                config,
            )
            for k in range(n_chunks)
        ]
        by_index = {idx: b for idx, b in zip(indices, builders, strict=True)}
        done: dict[int, GroupOutcome] = {}

        async def one(slot: int) -> None:
            chunk = chunks[slot]
            outcomes: list[GroupOutcome] = []
            for attempt in range(self.max_reruns + 1):
                try:
                    outcomes = await self._submit(slot, chunk)
                    break
                except WorkerLost as exc:
                    if attempt == self.max_reruns:
                        outcomes = [_lost(idx, b, exc) for idx, b in chunk.groups]
            for o in outcomes:
                done[o.index] = dataclasses.replace(o, builder=by_index[o.index])

        async with anyio.create_task_group() as tg:
            for slot in range(n_chunks):
                tg.start_soon(one, slot)
        outcomes = tuple(done[i] for i in indices if i in done)
        result = BatchResult(outcomes=outcomes, metrics=summarize(outcomes), elapsed_s=time.monotonic() - t0)
        if config.strategy.abort_batch and any(o.failure is not None for o in outcomes):
            raise BatchAborted(result, cancelled=0)
        return result


def _lost(index: int, builder: EnvGroupBuilder, exc: BaseException) -> GroupOutcome:
    err = error_of(exc)
    return GroupOutcome(
        index=index,
        builder=builder,
        group=None,
        stats=(),
        errors=(err,),
        failure=err,
        requested=0,
        completed=0,
        failed=0,
        retries=0,
        elapsed_s=0.0,
    )


def _spawn_pool(workers: int) -> ProcessPoolExecutor:
    # spawn: the Tinker client's threads and torch's do not survive fork (the cookbook's rule too).
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    )


def _exit_with_parent(parent: int) -> None:
    """Pool worker set-up: exit when the trainer is gone (a kill -9 of it leaves no orphan)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-trainer", daemon=True).start()


class ProcessExecutor(RolloutExecutor):
    """A pool of ``workers`` spawned processes (``rollout_executor=process:N``); a pool broken by a
    dead worker is replaced by a fresh one."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self._pool = _spawn_pool(workers)

    async def _submit(self, slot: int, chunk: Chunk) -> list[GroupOutcome]:
        pool = self._pool
        blob = cloudpickle.dumps(chunk)
        try:
            out = await asyncio.wrap_future(pool.submit(run_chunk_blob, blob))
        except BrokenProcessPool as exc:
            if self._pool is pool:  # the first chunk to see this pool broken replaces it
                self.workers_lost += 1
                self._pool = _spawn_pool(self.workers)
                pool.shutdown(wait=False, cancel_futures=True)
            raise WorkerLost(f"a rollout worker process died: {exc}") from None
        return load_outcomes(out)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class FuturesExecutor(RolloutExecutor):
    """A ``concurrent.futures.Executor`` handed over by the cookbook's ``set_rollout_executor``
    (not ours to rebuild: chunks of a broken one are reported lost once reruns are spent)."""

    def __init__(self, executor: Executor) -> None:
        super().__init__(int(getattr(executor, "_max_workers", 0) or os.cpu_count() or 1))
        self.executor = executor

    async def _submit(self, slot: int, chunk: Chunk) -> list[GroupOutcome]:
        try:
            fut = self.executor.submit(run_chunk_blob, cloudpickle.dumps(chunk))
            return load_outcomes(await asyncio.wrap_future(fut))
        except BrokenProcessPool as exc:
            self.workers_lost += 1
            raise WorkerLost(f"a rollout worker process died: {exc}") from None


class RayExecutor(RolloutExecutor):
    """``workers`` long-lived async Ray actors (``rollout_executor=ray:local[:N]|ray:auto[:N]``).

    ``local`` starts a cluster on this machine (listening on 127.0.0.1 only, no dashboard;
    stopped by :meth:`close`),
    ``auto`` joins the running one (its nodes must have TurnGym and the envs importable). A dead
    actor is replaced by a fresh one on its slot.
    """

    max_concurrency: int = 4096
    """Chunks one actor runs at once (each chunk's groups run concurrently inside it)."""

    def __init__(self, workers: int, address: str = "local") -> None:
        import ray

        super().__init__(workers)
        self._started = False
        if not ray.is_initialized():
            if address == "local":
                paths = [p for p in sys.path if p and Path(p).is_dir()]
                with _loopback_only():
                    ray.init(
                        address="local",
                        num_cpus=workers,
                        include_dashboard=False,
                        _node_ip_address="127.0.0.1",
                        log_to_driver=False,
                        configure_logging=False,
                        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}},
                    )
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            self._started = True
        self._actor_class: Any = ray.remote(_RayWorker)
        self._actors: list[Any] = [self._new_actor() for _ in range(workers)]

    def _new_actor(self) -> Any:
        return self._actor_class.options(num_cpus=1, max_concurrency=self.max_concurrency).remote()

    async def _submit(self, slot: int, chunk: Chunk) -> list[GroupOutcome]:
        import ray.exceptions

        actor = self._actors[slot]
        lost = (
            ray.exceptions.RayActorError,  # killed, crashed, its node gone
            ray.exceptions.OutOfMemoryError,  # Ray's memory monitor killed it
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.NodeDiedError,
        )
        try:
            blob = await actor.run.remote(chunk)
        except lost as exc:
            if self._actors[slot] is actor:
                self.workers_lost += 1
                with contextlib.suppress(Exception):
                    ray.kill(actor)
                self._actors[slot] = self._new_actor()
            raise WorkerLost(f"a rollout actor died: {type(exc).__name__}") from None
        return load_outcomes(blob)

    async def pids(self) -> list[int]:
        """The process ids of the actors (tests kill them)."""
        return [await a.pid.remote() for a in self._actors]

    def close(self) -> None:
        import ray

        for actor in self._actors:
            ray.kill(actor)
        self._actors = []
        if self._started and ray.is_initialized():
            ray.shutdown()
            self._started = False


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    """A local cluster started inside is reachable from this machine only: its node address is
    127.0.0.1, so the GCS, the raylet and the workers listen there, not on every interface.

    Ray turns a ``_node_ip_address`` of 127.0.0.1 into the machine's outward address (and its
    servers bind on that), unless it treats the host as a single-node one: the switch it reads
    for that (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, its default on macOS and Windows) is set
    for the start and put back after (the cluster's processes keep it)."""
    from ray._private import ray_constants

    name = ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR
    before_env, before = os.environ.get(name), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[name], ray_constants.ENABLE_RAY_CLUSTER = "0", False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before
        if before_env is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before_env


def open_executor(spec: ExecutorSpec | str) -> RolloutExecutor | None:
    """The executor of ``spec`` (``None`` for ``inprocess``: unless the cookbook's
    ``set_rollout_executor`` holds one, which is then used)."""
    spec = ExecutorSpec.parse(spec) if isinstance(spec, str) else spec
    if spec.kind == "process":
        return ProcessExecutor(spec.workers)
    if spec.kind == "ray":
        return RayExecutor(spec.workers, spec.address or "local")
    return cookbook_executor()


def cookbook_executor() -> RolloutExecutor | None:
    """The executor set with the cookbook's ``set_rollout_executor``, wrapped; ``None`` if unset."""
    from tinker_cookbook.rl.rollouts import get_rollout_executor

    executor = get_rollout_executor()
    return None if executor is None else FuturesExecutor(executor)
