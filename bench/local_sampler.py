"""Benchmark of the local sampler on SmolLM2-135M (CPU), side by side with HF ``generate``.

1. Throughput: N concurrent single-sample requests (``--new-tokens`` each) through our batched
   sampler vs N sequential ``model.generate`` calls on the same prompts.
2. Prefix reuse: a 10-turn conversation sampled with the prefix cache on vs off; prefilled tokens.
3. Logprob agreement: sampler logprobs vs ``compute_logprobs`` on the same tokens (max abs gap).

Run: ``nice .venv/bin/python bench/local_sampler.py [--quick]``. The last line is
``ratio_throughput_vs_hf_sequential=<x>`` (goal >= 4).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from tinker import types

from backend import SMOLLM2, LocalSamplingClient, LocalServiceClient, load_tokenizer
from backend.local._weights import pristine_base

QUESTIONS = [
    "What is the capital of France?",
    "Give me a tip for writing clean code.",
    "Why is the sky blue?",
    "Name three prime numbers.",
    "How do plants make food?",
    "What is a linked list?",
    "Describe a cat in one sentence.",
    "What does HTTP stand for?",
    "How far is the Moon?",
    "What is 12 times 12?",
    "Suggest a name for a dog.",
    "What is machine learning?",
    "Why do we sleep?",
    "What is the boiling point of water?",
    "Tell me a fun fact about octopuses.",
    "How do I make tea?",
]


def chat_prompt(tok, text: str) -> list[int]:
    return render(tok, [{"role": "user", "content": text}])


def render(tok, messages: list[dict[str, str]]) -> list[int]:
    return list(tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)))


def bench_throughput(
    sampler: LocalSamplingClient, tok, n: int, new_tokens: int
) -> tuple[float, float, float]:
    prompts = [chat_prompt(tok, QUESTIONS[i % len(QUESTIONS)]) for i in range(n)]
    model = pristine_base(SMOLLM2)
    # HF generate, sequential.
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i, p in enumerate(prompts):
            torch.manual_seed(i)
            model.generate(
                torch.tensor([p]),
                attention_mask=torch.ones(1, len(p), dtype=torch.long),
                do_sample=True,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                pad_token_id=2,
            )
    hf_s = time.perf_counter() - t0
    hf_tps = n * new_tokens / hf_s

    async def ours() -> list[types.SampleResponse]:
        params = [types.SamplingParams(max_tokens=new_tokens, stop=[], seed=i) for i in range(n)]
        return await asyncio.gather(
            *[
                sampler.sample(types.ModelInput.from_ints(p), 1, sp)
                for p, sp in zip(prompts, params, strict=True)
            ]
        )

    sampler.engine.clear_prefix_cache()
    t0 = time.perf_counter()
    results = asyncio.run(ours())
    our_s = time.perf_counter() - t0
    generated = sum(len(r.sequences[0].tokens) for r in results)
    our_tps = generated / our_s
    print(f"hf_generate_sequential: {n} x {new_tokens} tokens in {hf_s:.1f}s = {hf_tps:.1f} tok/s")
    print(
        f"local_sampler_concurrent: {generated} tokens in {our_s:.1f}s = {our_tps:.1f} tok/s "
        f"(mean decode batch {sampler.stats.mean_batch_size:.1f})"
    )
    # Logprob agreement on the sampled tokens.
    gap = 0.0
    for p, r in list(zip(prompts, results, strict=True))[:4]:
        seq = r.sequences[0]
        full = sampler.compute_logprobs(types.ModelInput.from_ints(p + seq.tokens)).result()
        assert seq.logprobs is not None
        gap = max(
            gap, max(abs(a - b) for a, b in zip(seq.logprobs, full[len(p) :], strict=True) if b is not None)
        )
    print(f"max_abs_logprob_gap_sampler_vs_compute_logprobs={gap:.2e}")
    return hf_tps, our_tps, gap


def conversation(sampler: LocalSamplingClient, tok, turns: int, reply_tokens: int) -> tuple[int, int, float]:
    before_p, before_r = sampler.stats.prefilled_tokens, sampler.stats.reused_tokens
    msgs = [{"role": "system", "content": "You are a concise, helpful assistant."}]
    t0 = time.perf_counter()
    for turn in range(turns):
        msgs.append({"role": "user", "content": f"Question {turn + 1}: {QUESTIONS[turn % len(QUESTIONS)]}"})
        p = render(tok, msgs)
        params = types.SamplingParams(max_tokens=reply_tokens, stop=[2], seed=turn)
        seq = sampler.sample(types.ModelInput.from_ints(p), 1, params).result().sequences[0]
        text = tok.decode([t for t in seq.tokens if t != 2])
        msgs.append({"role": "assistant", "content": text})
    elapsed = time.perf_counter() - t0
    return sampler.stats.prefilled_tokens - before_p, sampler.stats.reused_tokens - before_r, elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="8 requests x 24 tokens, 6 turns")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n, new_tokens, turns, reply = (8, 24, 6, 16) if args.quick else (16, 48, 10, 24)
    tok = load_tokenizer()
    service = LocalServiceClient()
    sampler = service.create_sampling_client(base_model=SMOLLM2).result()
    # Warm-up (first-call overheads) for both paths.
    sampler.sample(
        types.ModelInput.from_ints(chat_prompt(tok, "hi")), 1, types.SamplingParams(max_tokens=2)
    ).result()

    hf_tps, our_tps, _ = bench_throughput(sampler, tok, n, new_tokens)

    plain_service = LocalServiceClient(prefix_cache_tokens=0)
    plain = plain_service.create_sampling_client(base_model=SMOLLM2).result()
    pre_r, reused_r, t_r = conversation(sampler, tok, turns, reply)
    pre_n, reused_n, t_n = conversation(plain, tok, turns, reply)
    print(f"conversation_{turns}_turns reuse_on: prefilled={pre_r} reused={reused_r} time={t_r:.1f}s")
    print(f"conversation_{turns}_turns reuse_off: prefilled={pre_n} reused={reused_n} time={t_n:.1f}s")
    print(f"ratio_prefill_tokens_reuse_vs_none={pre_r / pre_n:.3f}")
    print(f"ratio_throughput_vs_hf_sequential={our_tps / hf_tps:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
