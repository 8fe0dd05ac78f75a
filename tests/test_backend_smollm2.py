"""The local backend on the real SmolLM2-135M: sampling, prefix reuse and logprob agreement."""

from __future__ import annotations

import pytest
from backend_fixtures import make_service
from tinker import types

from backend import SMOLLM2, load_tokenizer

pytestmark = pytest.mark.slow


def test_smollm2_chat_turns_reuse_prefix_and_agree_with_forward(tmp_path) -> None:
    tok = load_tokenizer()
    service = make_service(tmp_path)
    sampler = service.create_sampling_client(base_model=SMOLLM2).result()
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tok.encode(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False))
    seq = sampler.sample(
        types.ModelInput.from_ints(prompt), 1, types.SamplingParams(max_tokens=12, temperature=0.0)
    )
    first = seq.result().sequences[0]
    assert "Paris" in tok.decode(first.tokens)
    # Second turn extends the first: only the new suffix is prefilled.
    msgs += [{"role": "assistant", "content": tok.decode([t for t in first.tokens if t != 2])}]
    msgs += [{"role": "user", "content": "And of Italy?"}]
    prompt2 = tok.encode(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False))
    before = sampler.stats.reused_tokens
    second = (
        sampler.sample(
            types.ModelInput.from_ints(prompt2), 1, types.SamplingParams(max_tokens=8, temperature=0.0)
        )
        .result()
        .sequences[0]
    )
    assert sampler.stats.reused_tokens - before >= len(prompt)
    full = sampler.compute_logprobs(types.ModelInput.from_ints(prompt2 + second.tokens)).result()
    assert second.logprobs is not None
    gap = max(abs(a - b) for a, b in zip(second.logprobs, full[len(prompt2) :], strict=True) if b is not None)
    assert gap < 1e-3
