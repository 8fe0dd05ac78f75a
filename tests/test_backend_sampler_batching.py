"""Local sampler: batched prefill, slot KV cache, batch invariance and seeds (TINY model).

The decoder is batch-invariant, so a request's tokens *and* logprobs must be bit-identical
whether it ran alone, packed with other requests, from a cached prefix, or after slots moved
around: any KV written to the wrong slot or column shows up as a mismatch here.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
import torch
from backend_fixtures import TINY, encode, make_service
from tinker import types

from backend import LocalSamplingClient, LocalServiceClient
from backend.local._decoder import PrefillRow, SlotCache, SlotDecoder
from backend.local._sampler import draw_categorical
from backend.local._weights import pristine_base


def _params(seed: int, max_tokens: int = 8, **kwargs: object) -> types.SamplingParams:
    return types.SamplingParams(max_tokens=max_tokens, stop=[], seed=seed, **kwargs)  # type: ignore[arg-type]


def _sample(client: LocalSamplingClient, prompt: list[int], params: types.SamplingParams, n: int = 1):
    return client.sample(types.ModelInput.from_ints(prompt), n, params)


async def _gather(client: LocalSamplingClient, jobs: list[tuple[list[int], types.SamplingParams]]):
    return await asyncio.gather(*[_sample(client, p, sp) for p, sp in jobs])


def _key(seq: types.SampledSequence) -> tuple[list[int], list[float] | None]:
    return seq.tokens, seq.logprobs


@pytest.fixture
def sampler(tmp_path) -> LocalSamplingClient:
    return make_service(tmp_path).create_sampling_client(base_model=TINY).result()


def _prompts(n: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [
        encode(
            " ".join(rng.choice(["red", "fox", "sky", "a", "the", "runs"]) for _ in range(rng.randint(1, 40)))
        )
        for _ in range(n)
    ]


def test_decoder_matches_the_model_forward_pass() -> None:
    model = pristine_base(TINY)
    decoder = SlotDecoder(model)
    seqs = _prompts(3, seed=1)
    cache = decoder.new_cache()
    cache.ensure(3, 128)
    with torch.inference_mode():
        logits = decoder.prefill(cache, [PrefillRow(i, 0, s) for i, s in enumerate(seqs)])
        for i, s in enumerate(seqs):
            ref = model(input_ids=torch.tensor([s])).logits[0, -1].float()
            assert torch.allclose(logits[i], ref, atol=1e-4)
        step = decoder.decode(cache, [5, 6, 7], [len(s) for s in seqs])
        for i, s in enumerate(seqs):
            ref = model(input_ids=torch.tensor([[*s, 5 + i]])).logits[0, -1].float()
            assert torch.allclose(step[i], ref, atol=1e-4)


def test_decoder_is_batch_invariant_bit_for_bit() -> None:
    decoder = SlotDecoder(pristine_base(TINY))
    target = _prompts(1, seed=2)[0] + encode(" and then some more words follow here")
    with torch.inference_mode():
        alone = decoder.new_cache()
        alone.ensure(1, 128)
        ref = decoder.prefill(alone, [PrefillRow(0, 0, target)])[0]
        rng = random.Random(3)
        for _ in range(12):
            cache = decoder.new_cache()
            cache.ensure(6, 128)
            split = rng.randint(1, len(target) - 1)
            others = [
                PrefillRow(j, 0, p)
                for j, p in enumerate(_prompts(rng.randint(0, 5), seed=rng.randint(0, 99)), start=1)
            ]
            decoder.prefill(cache, [*others[:2], PrefillRow(0, 0, target[:split])])
            got = decoder.prefill(cache, [*others[2:], PrefillRow(0, split, target[split:])])
            assert torch.equal(got[len(others[2:])], ref), f"split at {split} with {len(others)} others"


def _alone_and_batched(
    tmp_path: Path, prompts: list[list[int]], params: list[types.SamplingParams]
) -> tuple[dict[int, tuple[list[int], list[float] | None]], list[types.SampleResponse], LocalSamplingClient]:
    """Each request sampled alone on a fresh service (its result's key), then all of them at once
    on another: ``(keys alone, results batched, the batched client)``."""
    alone = {}
    for i, (p, sp) in enumerate(zip(prompts, params, strict=True)):
        solo = make_service(tmp_path / f"solo{i}").create_sampling_client(base_model=TINY).result()
        alone[i] = _key(_sample(solo, p, sp).result().sequences[0])
    batched = make_service(tmp_path / "batched").create_sampling_client(base_model=TINY).result()
    results = asyncio.run(_gather(batched, list(zip(prompts, params, strict=True))))
    return alone, results, batched


def test_concurrent_requests_match_each_request_alone(tmp_path) -> None:
    """Packed prefill, a shared decode batch, rows finishing at different steps (slot moves)."""
    prompts = _prompts(7, seed=4)
    params = [_params(seed=i, max_tokens=3 + 2 * i) for i in range(7)]
    alone, results, batched = _alone_and_batched(tmp_path, prompts, params)
    for i, res in enumerate(results):
        assert _key(res.sequences[0]) == alone[i], f"request {i} changed when batched"
    assert batched.stats.prefill_passes < len(prompts)  # admitted together, prefilled together
    assert batched.stats.mean_batch_size > 2


def test_mixed_temperatures_in_one_batch_match_each_request_alone(tmp_path) -> None:
    """Rows of one temperature are drawn with one batched op (several temperatures, top-k / top-p
    rows and greedy rows in the same batch): each request samples as it does alone."""
    prompts = _prompts(7, seed=6)
    settings = [
        {"temperature": 0.8},
        {"temperature": 0.8},
        {"temperature": 0.6},
        {"temperature": 1.0},
        {"temperature": 0.8, "top_k": 5},
        {"temperature": 0.7, "top_p": 0.9},
        {"temperature": 0.0},
    ]
    params = [
        types.SamplingParams(max_tokens=4 + i, stop=[], seed=10 + i, **kw) for i, kw in enumerate(settings)
    ]
    alone, results, batched = _alone_and_batched(tmp_path, prompts, params)
    for i, res in enumerate(results):
        assert _key(res.sequences[0]) == alone[i], f"request {i} ({settings[i]}) changed when batched"
    assert batched.stats.mean_batch_size > 2


def test_prefix_reuse_is_bit_identical_to_a_full_prefill(tmp_path) -> None:
    reuse = make_service(tmp_path / "a").create_sampling_client(base_model=TINY).result()
    plain = (
        make_service(tmp_path / "b", prefix_cache_tokens=0).create_sampling_client(base_model=TINY).result()
    )
    convo = {"reuse": encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")}
    convo["plain"] = list(convo["reuse"])
    for turn in range(4):
        outs = {}
        for name, client in (("reuse", reuse), ("plain", plain)):
            seq = _sample(client, convo[name], _params(seed=turn, max_tokens=5)).result().sequences[0]
            outs[name] = _key(seq)
            convo[name] += seq.tokens + encode(f"<|im_end|>\n<|im_start|>user\nturn {turn}<|im_end|>\n")
        assert outs["reuse"] == outs["plain"]
    assert reuse.stats.reused_tokens > 0 and plain.stats.reused_tokens == 0


def test_identical_prompts_are_prefilled_once(sampler: LocalSamplingClient) -> None:
    prompt = encode("the same prompt for the whole group")
    jobs = [(prompt, _params(seed=i)) for i in range(6)]
    results = asyncio.run(_gather(sampler, jobs))
    assert sampler.stats.prefilled_tokens == len(prompt)
    assert len({tuple(r.sequences[0].tokens) for r in results}) > 1  # seeds differ


def test_shared_prefix_waits_one_pass_and_reuses_it(sampler: LocalSamplingClient) -> None:
    system = encode("a long shared system prompt " * 4)
    jobs = [(system + encode(f" question {i}?"), _params(seed=i, max_tokens=2)) for i in range(4)]
    asyncio.run(_gather(sampler, jobs))
    stats = sampler.stats
    assert stats.prefill_passes == 2
    assert stats.prefilled_tokens < len(system) + 4 * 6  # the system prompt was prefilled once
    total = sum(len(p) for p, _ in jobs)
    assert stats.prefilled_tokens + stats.reused_tokens == total


def test_cache_grows_for_a_long_prompt_mid_batch(tmp_path) -> None:
    short = encode("short")
    long = encode("word " * 300)
    solo = make_service(tmp_path / "solo").create_sampling_client(base_model=TINY).result()
    ref_long = _key(_sample(solo, long, _params(seed=2, max_tokens=4)).result().sequences[0])
    ref_short = _key(_sample(solo, short, _params(seed=1, max_tokens=40)).result().sequences[0])
    client = make_service(tmp_path / "b").create_sampling_client(base_model=TINY).result()

    async def run() -> tuple[types.SampleResponse, types.SampleResponse]:
        first = _sample(client, short, _params(seed=1, max_tokens=40))
        await asyncio.sleep(0.05)  # the short request is decoding when the long one arrives
        second = _sample(client, long, _params(seed=2, max_tokens=4))
        return await first, await second

    a, b = asyncio.run(run())
    assert _key(a.sequences[0]) == ref_short
    assert _key(b.sequences[0]) == ref_long


def test_seedless_requests_follow_the_engine_seed(tmp_path) -> None:
    prompt = encode("Pick a number:")
    params = types.SamplingParams(max_tokens=8, stop=[])

    def draws(seed: int | None, n: int = 3) -> list[list[int]]:
        service = LocalServiceClient(tmp_path, seed=seed)
        client = service.create_sampling_client(base_model=TINY).result()
        return [_sample(client, prompt, params).result().sequences[0].tokens for _ in range(n)]

    first = draws(7)
    assert first == draws(7)  # same service seed: same tokens, request by request
    assert len({tuple(t) for t in first}) > 1  # repeated identical requests still differ
    assert draws(8) != first
    assert draws(None) != draws(None)


def test_num_samples_rows_differ_and_repeat_with_the_seed(sampler: LocalSamplingClient) -> None:
    prompt = encode("Four samples please")
    a = _sample(sampler, prompt, _params(seed=3), n=4).result()
    b = _sample(sampler, prompt, _params(seed=3), n=4).result()
    assert [_key(s) for s in a.sequences] == [_key(s) for s in b.sequences]
    assert len({tuple(s.tokens) for s in a.sequences}) > 1


def test_draw_categorical_follows_the_weights_row_by_row() -> None:
    weights = torch.tensor([[0.0, 1.0, 0.0, 3.0], [2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 5.0, 5.0]])
    # The CDF inverted at u: row 0 is [0, 1, 1, 4]: u * 4 < 1 -> 1, else 3 (zero weights never).
    assert draw_categorical(weights, [0.0, 0.5, 0.49]).tolist() == [1, 0, 2]
    assert draw_categorical(weights, [0.25, 0.99, 0.5]).tolist() == [3, 0, 3]
    assert draw_categorical(weights, [1.0 - 2**-53] * 3).tolist() == [3, 0, 3]
    # u * total reaching the total (u = 1 here) searches past every index: the draw is then the
    # last index with weight, only in the rows where that happened.
    assert draw_categorical(torch.tensor([[1.0, 2.0, 0.0], [1.0, 1.0, 1.0]]), [1.0, 0.5]).tolist() == [1, 1]
    # A row's draw depends on its own weights and uniform only.
    gen = torch.Generator().manual_seed(0)
    many = torch.rand(64, 1000, generator=gen) ** 4
    uniforms = torch.rand(64, dtype=torch.float64, generator=gen).tolist()
    together = draw_categorical(many, uniforms)
    alone = [int(draw_categorical(many[i : i + 1], uniforms[i : i + 1])) for i in range(64)]
    assert together.tolist() == alone
    # Frequencies follow the weights.
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05, 0.0])
    draws = draw_categorical(
        probs.expand(20000, -1), torch.rand(20000, dtype=torch.float64, generator=gen).tolist()
    )
    freq = torch.bincount(draws, minlength=5).double() / 20000
    assert torch.allclose(freq, probs.double(), atol=0.015) and freq[4] == 0
    with pytest.raises(RuntimeError, match="nan"):
        draw_categorical(torch.tensor([[1.0, float("nan")]]), [0.5])


def test_decoder_without_onednn_agrees_and_is_batch_invariant() -> None:
    model = pristine_base(TINY)
    seqs = _prompts(4, seed=5)
    outs = {}
    with torch.inference_mode():
        for onednn in (False, True):
            decoder = SlotDecoder(model, onednn=onednn)
            assert decoder.onednn == onednn
            together = decoder.new_cache()
            together.ensure(4, 128)
            got = decoder.prefill(together, [PrefillRow(i, 0, s) for i, s in enumerate(seqs)])
            step = decoder.decode(together, [5, 6, 7, 8], [len(s) for s in seqs])
            for i, s in enumerate(seqs):
                alone = decoder.new_cache()
                alone.ensure(1, 128)
                assert torch.equal(decoder.prefill(alone, [PrefillRow(0, 0, s)])[0], got[i])
                assert torch.equal(decoder.decode(alone, [5 + i], [len(s)])[0], step[i])
            outs[onednn] = step
    assert torch.allclose(outs[False], outs[True], atol=1e-4)


def test_blocked_onednn_products_agree_with_whole_ones() -> None:
    """Where rows vary with the row count (AMX, bfloat16, 2 threads), products run in blocks of
    ``ONEDNN_BLOCK_ROWS`` rows, the last padded: same results, every post-op, any row count."""
    from backend.local import _decoder

    if not _decoder.onednn_linear_works(torch.float32):
        pytest.skip("oneDNN products do not run here")
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(48, 40, generator=gen)
    whole, blocked = _decoder.Linear(w, True), _decoder.Linear(w, True)
    blocked.max_rows = 8
    with torch.inference_mode():
        for rows in (4, 8, 9, 17, 21, 33):
            x = torch.randn(rows, 40, generator=gen)
            other = torch.randn(rows, 48, generator=gen)
            for name, args in (("__call__", (x,)), ("silu", (x,)), ("mul", (x, other)), ("add", (x, other))):
                a, b = getattr(whole, name)(*args), getattr(blocked, name)(*args)
                assert a.shape == b.shape == (rows, 48), (name, rows)
                assert torch.allclose(a, b, atol=1e-5), (name, rows)


def test_decoder_blocks_its_products_where_rows_vary(monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.local import _decoder

    if not _decoder.onednn_linear_works(torch.float32):
        pytest.skip("oneDNN products do not run here")
    model = pristine_base(TINY)
    assert isinstance(_decoder.onednn_rows_vary([model.lm_head.weight]), bool)
    plain = SlotDecoder(model, onednn=True)
    monkeypatch.setattr(_decoder, "onednn_rows_vary", lambda weights: True)
    monkeypatch.setattr(_decoder, "ONEDNN_BLOCK_ROWS", 4)
    blocked = SlotDecoder(model, onednn=True)
    assert blocked.block_rows == 4 and blocked.lm_head.max_rows == 4
    assert all(lin.max_rows == 4 for lin in (blocked.layers[0].qkv, blocked.layers[-1].down))
    seqs = _prompts(3, seed=7)
    with torch.inference_mode():
        outs = []
        for decoder in (plain, blocked):
            cache = decoder.new_cache()
            cache.ensure(3, 128)
            outs.append(decoder.prefill(cache, [PrefillRow(i, 0, s) for i, s in enumerate(seqs)]))
    assert torch.allclose(outs[0], outs[1], atol=1e-4)


@pytest.mark.parametrize("length", [1, 63, 64, 150])
def test_slot_cache_blocks_round_trip_across_chunks(length: int) -> None:
    """KV blocks written into a slot, copied to another and grown with the storage read back as
    written, whole chunks and a partial last one alike; columns past them are left alone."""
    cache = SlotCache(layers=2, kv_heads=3, head_dim=4, dtype=torch.bfloat16)
    cache.ensure(3, length + 1)
    block = torch.randn(2, 2, 3, length, 4).to(torch.bfloat16)
    other = torch.randn(2, 2, 3, length + 1, 4).to(torch.bfloat16)
    cache.write(2, other)
    cache.write(0, block)
    assert torch.equal(cache.read(0, length), block)
    cache.copy(0, 2, length)
    assert torch.equal(cache.read(2, length), block)
    assert torch.equal(cache.read(2, length + 1)[:, :, :, length], other[:, :, :, length])
    cache.ensure(5, 2 * cache.capacity)  # growth keeps what was written
    assert torch.equal(cache.read(0, length), block)
    assert torch.equal(cache.read(2, length), block)
