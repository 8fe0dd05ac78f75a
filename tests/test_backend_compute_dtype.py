"""The local backend's bfloat16 compute option (TINY model): what changes and what must not."""

from __future__ import annotations

import pytest
import torch
from backend_fixtures import TINY, ce_datum, encode, make_service, prompt
from tinker import types

from backend import LocalServiceClient
from backend.local._weights import pristine_base

SEQ = "The quick brown fox jumps over the lazy dog, again and again."


def test_unknown_compute_dtype_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(ValueError, match="compute_dtype must be one of float32, bfloat16, got 'float16'"):
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
