"""The local backend's compute dtype (TINY model): bfloat16 (what changes and what must not) and
``auto`` (the per-machine probe, its cache and its log line)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from backend_fixtures import TINY, ce_datum, encode, make_service, prompt
from tinker import types

import training
from backend import LocalServiceClient
from backend.local import _dtype
from backend.local._weights import pristine_base

SEQ = "The quick brown fox jumps over the lazy dog, again and again."


def test_unknown_compute_dtype_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(
        ValueError, match="compute_dtype must be one of auto, float32, bfloat16, got 'float16'"
    ):
        LocalServiceClient(tmp_path, compute_dtype="float16")


def test_bfloat16_samplers_convert_private_copies(tmp_path) -> None:
    service = make_service(tmp_path, compute_dtype="bfloat16")
    base = service.create_sampling_client(base_model=TINY).result()
    trainer = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    tuned = trainer.save_weights_and_get_sampling_client().result()
    for client in (base, tuned):
        assert next(client._engine.model.parameters()).dtype == torch.bfloat16
    # The shared pristine base (and so every float32 client) is untouched.
    assert next(pristine_base(TINY).parameters()).dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in trainer.core.params)


def test_bfloat16_sampler_and_trainer_agree_roughly_and_training_still_learns(tmp_path) -> None:
    service = make_service(tmp_path, compute_dtype="bfloat16")
    trainer = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()
    p = encode("Say something:")
    seq = sampler.sample(prompt("Say something:"), 1, types.SamplingParams(max_tokens=8, stop=[], seed=1))
    out = seq.result().sequences[0]
    assert out.logprobs is not None and len(out.tokens) == 8
    tokens = p + out.tokens
    fwd = trainer.forward([ce_datum(tokens)], "cross_entropy").result()
    train_lp = fwd.loss_fn_outputs[0]["logprobs"].tolist()[len(p) - 1 :]
    gap = max(abs(a - b) for a, b in zip(out.logprobs, train_lp, strict=True))
    assert gap < 0.25  # bfloat16 on both sides: close, not exact (float32 agrees to ~1e-5)

    datum = ce_datum(encode(SEQ))
    losses = []
    for _ in range(4):
        losses.append(trainer.forward_backward([datum], "cross_entropy").result().metrics["loss:sum"])
        trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    assert losses[-1] < losses[0] - 1.0
    assert all(p.dtype == torch.float32 and p.grad is None for p in trainer.core.params)


def test_float32_is_the_default(tmp_path) -> None:
    service = make_service(tmp_path)
    assert service.compute_dtype == "float32"
    trainer = service.create_lora_training_client(TINY, rank=4, seed=0).result()
    sampler = trainer.save_weights_and_get_sampling_client().result()
    assert next(sampler._engine.model.parameters()).dtype == torch.float32


# ---------------------------------------------------------------------------------- auto
def _fake_probe(monkeypatch: pytest.MonkeyPatch, speedup: float) -> list[int]:
    calls: list[int] = []

    def probe(repeats: int = 3) -> float:
        calls.append(repeats)
        return speedup

    monkeypatch.setattr(_dtype, "probe_bfloat16_speedup", probe)
    return calls


@pytest.mark.parametrize(("speedup", "expected"), [(1.6, "bfloat16"), (1.05, "float32"), (0.4, "float32")])
def test_auto_picks_by_the_probe_and_caches_it_per_machine(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    speedup: float,
    expected: str,
) -> None:
    calls = _fake_probe(monkeypatch, speedup)
    path = tmp_path / "compute_dtype.json"
    with caplog.at_level(logging.INFO, logger="backend.local._dtype"):
        assert _dtype.resolve_compute_dtype("auto", path=path) == expected
        assert _dtype.resolve_compute_dtype("auto", path=path) == expected
    assert len(calls) == 1  # the second call read the cache
    assert f"auto -> {expected}" in caplog.text and "cached in" in caplog.text
    (entry,) = json.loads(path.read_text()).values()
    assert entry["dtype"] == expected and entry["cpu"] == _dtype.machine_fingerprint()["cpu"]
    # another machine (here: another thread count) probes again
    monkeypatch.setattr(_dtype, "machine_fingerprint", lambda: {"cpu": "other", "threads": "64"})
    _dtype.resolve_compute_dtype("auto", path=path)
    assert len(calls) == 2 and len(json.loads(path.read_text())) == 2


def test_auto_reprobes_over_a_corrupt_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_probe(monkeypatch, 2.0)
    path = tmp_path / "compute_dtype.json"
    path.write_text("{not json")
    assert _dtype.resolve_compute_dtype("auto", path=path) == "bfloat16"
    assert len(calls) == 1 and json.loads(path.read_text())


def test_service_resolves_auto_to_a_concrete_dtype(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_probe(monkeypatch, 0.5)
    monkeypatch.setattr(_dtype, "cache_file", lambda: tmp_path / "compute_dtype.json")
    service = make_service(tmp_path, compute_dtype="auto")
    assert service.compute_dtype == "float32"
    assert service.create_lora_training_client(TINY, rank=4, seed=0).result().core.compute_dtype == "float32"


def test_the_real_probe_measures_both_dtypes() -> None:
    speedup = _dtype.probe_bfloat16_speedup(repeats=1)
    assert 0.01 < speedup < 100


def test_training_configs_default_to_auto() -> None:
    from envs.twenty_questions.train import TwentyQuestionsTrainConfig

    assert training.Config().local_compute_dtype == "auto"
    assert TwentyQuestionsTrainConfig().local_compute_dtype == "auto"


def test_the_probe_runs_on_one_thread_and_restores_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A multi-threaded probe on a loaded machine times the neighbours (it read 0.37x on an AMX
    machine where bfloat16 is 2x faster): the probe times one thread, then puts the count back."""
    import torch

    seen: list[int] = []
    real = torch.nn.functional.linear

    def spy(*args: object, **kwargs: object) -> torch.Tensor:
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        monkeypatch.setattr(torch.nn.functional, "linear", spy)
        _dtype.probe_bfloat16_speedup(repeats=1)
        assert seen and set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_the_cache_key_names_the_probe_version() -> None:
    assert _dtype.machine_fingerprint()["probe"] == _dtype.PROBE_VERSION
