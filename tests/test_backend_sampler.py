"""Local sampling client: params, stops, batching, prefix reuse, cancellation, futures (TINY model)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future

import anyio
import pytest
from backend_fixtures import TINY, encode, make_service, prompt
from tinker import types

from backend import LocalSamplingClient, PromptTooLongError, load_tokenizer
from backend.local._futures import LocalFuture


@pytest.fixture(scope="module")
def sampler(tmp_path_factory: pytest.TempPathFactory) -> LocalSamplingClient:
    return make_service(tmp_path_factory.mktemp("ckpt")).create_sampling_client(base_model=TINY).result()


def _gap(a: list[float], b: list[float | None]) -> float:
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True) if y is not None)


def greedy(sampler: LocalSamplingClient, text: str, n: int) -> list[int]:
    params = types.SamplingParams(max_tokens=n, temperature=0.0, stop=[])
    return sampler.sample(prompt(text), 1, params).result().sequences[0].tokens


def test_max_tokens_gives_length(sampler: LocalSamplingClient) -> None:
    res = sampler.sample(
        prompt("Count: one two"), 2, types.SamplingParams(max_tokens=7, stop=[], seed=3)
    ).result()
    assert isinstance(res, types.SampleResponse)
    assert len(res.sequences) == 2
    for seq in res.sequences:
        assert seq.stop_reason == "length"
        assert len(seq.tokens) == 7
        assert seq.logprobs is not None and len(seq.logprobs) == 7
        assert all(lp <= 0 for lp in seq.logprobs)


def test_stop_token_id_is_included(sampler: LocalSamplingClient) -> None:
    free = greedy(sampler, "The sky is", 6)
    stop_id = free[3]
    first = free.index(stop_id)
    seq = (
        sampler.sample(
            prompt("The sky is"), 1, types.SamplingParams(max_tokens=6, temperature=0.0, stop=[stop_id])
        )
        .result()
        .sequences[0]
    )
    assert seq.stop_reason == "stop"
    assert seq.tokens == free[: first + 1]
    assert seq.tokens[-1] == stop_id


def test_stop_string(sampler: LocalSamplingClient) -> None:
    tok = load_tokenizer()
    free = greedy(sampler, "Once upon a time", 12)
    text = tok.decode(free[:8])
    stop = text[-3:] if len(text.strip()) >= 3 else text
    seq = (
        sampler.sample(
            prompt("Once upon a time"), 1, types.SamplingParams(max_tokens=12, temperature=0.0, stop=stop)
        )
        .result()
        .sequences[0]
    )
    assert seq.stop_reason == "stop"
    decoded = tok.decode(seq.tokens)
    assert stop in decoded
    assert stop not in tok.decode(seq.tokens[:-1])  # stopped at the first token completing it
    assert seq.tokens == free[: len(seq.tokens)]


def test_default_stop_is_eos(sampler: LocalSamplingClient) -> None:
    free = greedy(sampler, "Hello", 5)
    # stop=None falls back to the model's EOS id (2, <|im_end|>).
    seq = (
        sampler.sample(prompt("Hello"), 1, types.SamplingParams(max_tokens=5, temperature=0.0))
        .result()
        .sequences[0]
    )
    assert seq.tokens == free[: len(seq.tokens)]
    assert (seq.stop_reason == "stop") == (2 in free)


def test_seed_is_reproducible_and_varies(sampler: LocalSamplingClient) -> None:
    p = prompt("Pick a number:")
    a = (
        sampler.sample(p, 1, types.SamplingParams(max_tokens=8, seed=11, stop=[]))
        .result()
        .sequences[0]
        .tokens
    )
    b = (
        sampler.sample(p, 1, types.SamplingParams(max_tokens=8, seed=11, stop=[]))
        .result()
        .sequences[0]
        .tokens
    )
    c = (
        sampler.sample(p, 1, types.SamplingParams(max_tokens=8, seed=12, stop=[]))
        .result()
        .sequences[0]
        .tokens
    )
    assert a == b
    assert a != c


def test_top_k_one_is_greedy(sampler: LocalSamplingClient) -> None:
    free = greedy(sampler, "Top k test", 6)
    seq = sampler.sample(
        prompt("Top k test"), 1, types.SamplingParams(max_tokens=6, top_k=1, stop=[], seed=5)
    )
    assert seq.result().sequences[0].tokens == free
    tiny_p = sampler.sample(
        prompt("Top k test"), 1, types.SamplingParams(max_tokens=6, top_p=1e-9, stop=[], seed=5)
    )
    assert tiny_p.result().sequences[0].tokens == free


def test_sampler_logprobs_match_compute_logprobs(sampler: LocalSamplingClient) -> None:
    p = encode("Logprob agreement check")
    seq = sampler.sample(
        types.ModelInput.from_ints(p), 1, types.SamplingParams(max_tokens=10, stop=[], seed=1)
    )
    s = seq.result().sequences[0]
    full = sampler.compute_logprobs(types.ModelInput.from_ints(p + s.tokens)).result()
    assert full[0] is None
    assert s.logprobs is not None
    assert _gap(s.logprobs, full[len(p) :]) < 1e-4


def test_concurrent_requests_are_batched_and_correct(sampler: LocalSamplingClient) -> None:
    async def run() -> list[tuple[list[int], types.SampledSequence]]:
        prompts = [encode("x " * (i + 1)) for i in range(8)]  # different lengths -> left padding
        params = [types.SamplingParams(max_tokens=12, stop=[], seed=i) for i in range(8)]
        results = await asyncio.gather(
            *[
                sampler.sample(types.ModelInput.from_ints(p), 1, sp)
                for p, sp in zip(prompts, params, strict=True)
            ]
        )
        return [(p, r.sequences[0]) for p, r in zip(prompts, results, strict=True)]

    before = sampler.stats.decode_rows, sampler.stats.decode_steps
    pairs = asyncio.run(run())
    rows = sampler.stats.decode_rows - before[0]
    steps = sampler.stats.decode_steps - before[1]
    assert rows / steps > 2  # rows shared decode steps
    for p, s in pairs:
        full = sampler.compute_logprobs(types.ModelInput.from_ints(p + s.tokens)).result()
        assert s.logprobs is not None
        assert _gap(s.logprobs, full[len(p) :]) < 1e-4  # padding did not change the numbers


def test_prefix_reuse_matches_no_reuse(tmp_path) -> None:
    reuse = make_service(tmp_path).create_sampling_client(base_model=TINY).result()
    plain = make_service(tmp_path, prefix_cache_tokens=0).create_sampling_client(base_model=TINY).result()
    assert reuse.engine is not plain.engine
    history = encode("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n")
    outs: dict[str, list[types.SampledSequence]] = {"reuse": [], "plain": []}
    convo = {"reuse": list(history), "plain": list(history)}
    for turn in range(3):
        for name, client in (("reuse", reuse), ("plain", plain)):
            params = types.SamplingParams(max_tokens=6, stop=[], seed=100 + turn)
            s = client.sample(types.ModelInput.from_ints(convo[name]), 1, params).result().sequences[0]
            outs[name].append(s)
            convo[name] += s.tokens + encode(
                f"<|im_end|>\n<|im_start|>user\nturn {turn}<|im_end|>\n<|im_start|>assistant\n"
            )
    for a, b in zip(outs["reuse"], outs["plain"], strict=True):
        assert a.tokens == b.tokens
        assert a.logprobs is not None and b.logprobs is not None
        assert _gap(a.logprobs, b.logprobs) < 1e-4
    assert plain.stats.reused_tokens == 0
    assert reuse.stats.reused_tokens > 0
    assert reuse.stats.prefilled_tokens < plain.stats.prefilled_tokens
    assert reuse.stats.prefilled_tokens + reuse.stats.reused_tokens == plain.stats.prefilled_tokens


def test_num_samples_share_prefill(sampler: LocalSamplingClient) -> None:
    before = sampler.stats.prefilled_tokens + sampler.stats.reused_tokens
    p = encode("Four samples of one prompt please")
    res = sampler.sample(
        types.ModelInput.from_ints(p), 4, types.SamplingParams(max_tokens=5, stop=[], seed=9)
    )
    seqs = res.result().sequences
    assert len(seqs) == 4
    assert len({tuple(s.tokens) for s in seqs}) > 1
    assert sampler.stats.prefilled_tokens + sampler.stats.reused_tokens - before == len(p)


def test_cancelled_sample_leaves_batcher_healthy(sampler: LocalSamplingClient) -> None:
    engine = sampler.engine
    long_params = types.SamplingParams(max_tokens=1500, stop=[], seed=0)

    async def run() -> types.SampleResponse:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(sampler.sample(prompt("cancel me"), 1, long_params), timeout=0.05)
        return await sampler.sample(
            prompt("next one"), 1, types.SamplingParams(max_tokens=4, stop=[], seed=1)
        )

    before = engine.stats.generated_tokens
    res = asyncio.run(run())
    assert len(res.sequences[0].tokens) == 4
    deadline = time.monotonic() + 5
    while engine._rows and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not engine._rows  # the cancelled row was dropped
    assert engine.stats.generated_tokens - before < 1500


def test_futures_three_ways(sampler: LocalSamplingClient) -> None:
    params = types.SamplingParams(max_tokens=3, stop=[], seed=2)
    fut = sampler.sample(prompt("futures"), 1, params)
    assert isinstance(fut, LocalFuture)
    assert isinstance(fut.future(), Future)
    sync = fut.result(timeout=30).sequences[0].tokens

    async def in_loop() -> list[list[int]]:
        a = await sampler.sample(prompt("futures"), 1, params)
        b = await sampler.sample(prompt("futures"), 1, params).result_async(timeout=30)
        c = sampler.sample(prompt("futures"), 1, params).result()  # blocking inside a running loop
        return [a.sequences[0].tokens, b.sequences[0].tokens, c.sequences[0].tokens]

    assert asyncio.run(in_loop()) == [sync] * 3
    assert anyio.run(in_loop) == [sync] * 3


def test_prompt_too_long(sampler: LocalSamplingClient) -> None:
    ctx = sampler.engine.context_length
    with pytest.raises(PromptTooLongError, match="context window"):
        sampler.sample(types.ModelInput.from_ints([5] * (ctx + 1)), 1, types.SamplingParams(max_tokens=1))
    with pytest.raises(PromptTooLongError, match="max_tokens"):
        sampler.sample(types.ModelInput.from_ints([5] * 10), 1, types.SamplingParams(max_tokens=ctx))
    with pytest.raises(PromptTooLongError):
        sampler.compute_logprobs(types.ModelInput.from_ints([5] * (ctx + 1)))


def test_prompt_logprobs_and_last_n(sampler: LocalSamplingClient) -> None:
    p = prompt("score these prompt tokens")
    full = sampler.compute_logprobs(p).result()
    last = sampler.compute_logprobs(p, prompt_logprobs_last_n=2).result()
    assert len(full) == len(last) == p.length
    assert last[:-2] == [None] * (p.length - 2)
    assert last[-2:] == full[-2:]
    res = sampler.sample(
        p, 1, types.SamplingParams(max_tokens=1, stop=[]), include_prompt_logprobs=True
    ).result()
    assert res.prompt_logprobs is not None
    assert _gap([x for x in full[1:] if x is not None], res.prompt_logprobs[1:]) < 1e-5


def test_get_tokenizer_and_base_model(sampler: LocalSamplingClient) -> None:
    assert sampler.get_base_model() == TINY
    assert sampler.get_tokenizer().encode("<|im_end|>") == [2]
    assert anyio.run(sampler.get_base_model_async) == TINY
