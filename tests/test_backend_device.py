"""The local backend runs all of its torch work on one compute thread (``backend.local._device``).

Why it matters: with PyTorch's GNU OpenMP, a second thread that runs parallel ops makes every
thread's small ops ~10x slower (see the module's docstring). These tests pin where the work runs,
that waiting on the compute thread from itself fails clearly instead of deadlocking, that an
idle sampling engine still releases its KV cache and its timer never keeps it alive, and that
importing :mod:`backend` shortens GNU OpenMP's spinning where it still can (``backend/_openmp.py``).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import CancelledError, Future
from pathlib import Path
from typing import Any

import pytest
from backend_fixtures import TINY, ce_datum, encode, make_service, prompt
from tinker import types

from backend import LocalBackendError, _openmp
from backend.local import _device
from backend.local._futures import then
from backend.local._sampler import SamplerEngine
from backend.local._trainer import TrainerCore


def test_trainer_sampler_and_creation_all_run_on_the_compute_thread(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, set[str]] = {}

    def spy(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen.setdefault(name, set()).add(threading.current_thread().name)
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    for name in ("__init__", "forward_backward", "optim_step", "adapter_state"):
        spy(TrainerCore, name)
    for name in ("__init__", "_prefill_wave", "_decode_step", "_prompt_logprobs"):
        spy(SamplerEngine, name)

    service = make_service(tmp_path)
    trainer = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    tokens = encode("The quick brown fox jumps over the lazy dog.")
    trainer.forward_backward([ce_datum(tokens)], "cross_entropy").result()
    trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()
    params = types.SamplingParams(max_tokens=4, temperature=1.0, stop=[], seed=1)
    sampler.sample(prompt("Hello"), 2, params).result()
    sampler.compute_logprobs(prompt("Hello there, how are you today?"), prompt_logprobs_last_n=2).result()
    base = service.create_sampling_client(base_model=TINY).result()
    base.sample(prompt("Hi"), 1, params).result()

    expected = {
        "__init__",
        "forward_backward",
        "optim_step",
        "adapter_state",
        "_prefill_wave",
        "_decode_step",
        "_prompt_logprobs",
    }
    assert expected <= set(seen)
    threads = set().union(*seen.values())
    assert threads and all(t.startswith(_device.THREAD_NAME) for t in threads), seen


def test_waiting_on_the_compute_thread_from_itself_fails_clearly(tmp_path) -> None:
    service = make_service(tmp_path)
    trainer = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    sampler = service.create_sampling_client(base_model=TINY).result()
    params = types.SamplingParams(max_tokens=2, temperature=0.0, stop=[])

    def loss_that_samples(data: list[types.Datum], logprobs: list[Any]) -> Any:
        sampler.sample(prompt("Hello"), 1, params).result()  # would wait for its own thread
        raise AssertionError("unreachable")

    tokens = encode("One two three four five.")
    with pytest.raises(LocalBackendError, match="deadlock"):
        trainer.forward_backward_custom([ce_datum(tokens)], loss_that_samples).result(timeout=60)
    # The compute thread is free again: both clients still serve.
    assert len(sampler.sample(prompt("Hello"), 1, params).result(timeout=60).sequences[0].tokens) == 2
    trainer.forward_backward([ce_datum(tokens)], "cross_entropy").result(timeout=60)


def test_an_idle_engine_releases_its_cache_and_serves_again(tmp_path) -> None:
    sampler = make_service(tmp_path).create_sampling_client(base_model=TINY).result()
    engine = sampler.engine
    engine._idle_exit_s = 0.2
    params = types.SamplingParams(max_tokens=3, temperature=0.0, stop=[])
    first = sampler.sample(prompt("Count: one"), 1, params).result().sequences[0].tokens
    assert engine._cache.keys is not None
    deadline = time.monotonic() + 10
    while engine._cache.keys is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine._cache.keys is None, "the idle engine kept its KV cache"
    again = sampler.sample(prompt("Count: one"), 1, params).result().sequences[0].tokens
    assert again == first


def test_the_idle_timer_never_keeps_an_engine_alive(tmp_path) -> None:
    """A dropped engine is freed at once, its idle timer still pending: the timer holds it weakly.

    Were the timer's daemon thread to drop the last reference, the model's tensors would be freed
    there, and at interpreter exit torch's deallocator on that thread aborts the process
    ("terminate called without an active exception": seen at the end of the test suite)."""
    service = make_service(tmp_path)
    sampler = service.create_sampling_client(base_model=TINY).result()
    engine = sampler.engine
    engine._idle_exit_s = 60.0
    params = types.SamplingParams(max_tokens=2, temperature=0.0, stop=[])
    sampler.sample(prompt("Count: one"), 1, params).result(timeout=60)
    deadline = time.monotonic() + 10
    while engine._idle_timer is None and time.monotonic() < deadline:
        time.sleep(0.01)
    timer = engine._idle_timer
    assert timer is not None, "the engine went idle without arming its timer"
    _device.run(lambda: None)  # the round that armed the timer has returned (its frame holds the engine)
    ref = weakref.ref(engine)
    del engine, sampler, service
    gc.collect()
    try:
        assert timer.is_alive()
        assert ref() is None, "the idle timer kept the engine (and its model) alive"
    finally:
        timer.cancel()


def test_then_maps_results_and_carries_errors_and_cancellation() -> None:
    src: Future[int] = Future()
    doubled = then(src, lambda x: 2 * x)
    src.set_result(21)
    assert doubled.result(timeout=1) == 42

    failing: Future[int] = Future()
    mapped = then(failing, lambda x: x)
    failing.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        mapped.result(timeout=1)

    upstream: Future[int] = Future()
    downstream = then(upstream, lambda x: x)
    assert downstream.cancel()
    assert upstream.cancelled()

    source: Future[int] = Future()
    derived = then(source, lambda x: x)
    source.cancel()
    with pytest.raises(CancelledError):
        derived.result(timeout=1)


def _spin_count_after(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run(
        [sys.executable, "-c", f"{code}; import os; print(os.environ.get('GOMP_SPINCOUNT'))"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    return out.stdout.strip().splitlines()[-1]


def test_importing_backend_shortens_openmp_spinning_unless_too_late_or_chosen() -> None:
    assert _spin_count_after("import backend") == _openmp.SPIN_COUNT
    assert _spin_count_after("import backend", GOMP_SPINCOUNT="5") == "5"
    assert _spin_count_after("import backend", OMP_WAIT_POLICY="passive") == "None"
    # torch already loaded libgomp, which read its settings then: setting it now would be a lie.
    assert _spin_count_after("import torch; import backend") == "None"
