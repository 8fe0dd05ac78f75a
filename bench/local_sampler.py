"""Benchmark of the local sampler on SmolLM2-135M (CPU), side by side with transformers' ``generate``.

1. Forward throughput: ``model(input_ids)`` on 4 x 256 random tokens (inference mode, warm, best
   of several): what the hardware does for this model, the ceiling sampling can approach. Measured
   in float32 and in the compute dtype ``compute_dtype="auto"`` picks on this machine (bfloat16
   where it is faster), with the model's weights in that dtype, as the sampler holds them.
2. Multi-turn workload: C conversations x T turns x N sampled tokens (no early stop). Turn t's
   prompt is turn t-1's prompt + its N sampled tokens + the next user message, as tokens.
   - ours: each conversation is a task sending one ``sample`` request per turn to the local
     sampling client (continuous batching, batched prefill, KV prefix reuse across turns);
   - transformers: one left-padded batch per turn through ``model.generate`` (a competent user's
     batched loop), once per cache implementation tried (``dynamic``, the default, and
     ``static``); the best one is the peer.
   Ours runs in float32 and, where ``auto`` picks another dtype, also in that one (each against
   the forward throughput of its own dtype); the peer runs in float32.
   Both sides are warmed up on a short run of the same workload first; runs are interleaved.
3. Prefix reuse: one 10-turn conversation with the prefix cache on vs off; prefilled tokens.
4. Logprob agreement: sampled logprobs vs a clean forward pass on the same tokens (max abs gap).
5. The fraction's ceiling on this machine: our sampler's passes (its decode steps and prefill passes, at
   their mean sizes) replayed through the sampler's own linear products and norms alone, with no
   attention, cache, draw or bookkeeping. A decode step's 32 rows run these products at a lower
   rate per token than the forward's 1,024, so this bounds what any sampler built on them can
   reach, whatever its attention costs.

The peer (and every other torch call of this script) runs on the backend's compute thread, as
ours does, so the process has one OpenMP thread pool (a second one slows both sides: see
``bench/compute_thread.py``).

Run: ``nice .venv/bin/python bench/local_sampler.py [--quick]`` (``--quick``: the tiny test model,
4 x 2 x 4; no figure to compare). The last line is
``ratio_vs_hf_batched=<x> fraction_of_forward_throughput=<y> fraction_of_forward_throughput_auto=<a>
ratio_prefill_tokens_reuse_vs_none=<z> fraction_ceiling_products_only=<c>
fraction_ceiling_products_only_auto=<ca>``, ``y`` and ``c`` in float32, ``a`` and ``ca`` in the
dtype ``auto`` picks (named in the output; equal where that is float32) (goals: x >= 3, y and a >=
0.5 on 32 x 8 x 16; ``c`` and ``ca`` say whether 0.5 is within reach here).

The figures measured so far, by machine, are in ``docs/measurements.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from tinker import types

from backend import SMOLLM2, TINY, LocalSamplingClient, LocalServiceClient, load_tokenizer
from backend.local._decoder import SlotDecoder
from backend.local._device import run as on_compute_thread
from backend.local._dtype import resolve_compute_dtype
from backend.local._sampler import SamplerStats
from backend.local._weights import pristine_base

SYSTEM = "You are a concise, helpful assistant."
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


class Workload:
    """Token sequences of the multi-turn workload (the same work for every side)."""

    def __init__(self, tok, conversations: int, turns: int, new_tokens: int) -> None:
        self.conversations, self.turns, self.new_tokens = conversations, turns, new_tokens
        self.first = [
            self._encode(tok, f"<|im_start|>system\n{SYSTEM}<|im_end|>\n") + self._user(tok, c, 0, first=True)
            for c in range(conversations)
        ]
        self.follow = [[self._user(tok, c, t) for t in range(turns)] for c in range(conversations)]

    @staticmethod
    def _encode(tok, text: str) -> list[int]:
        return list(tok.encode(text))

    def _user(self, tok, conv: int, turn: int, first: bool = False) -> list[int]:
        question = QUESTIONS[(conv + turn) % len(QUESTIONS)]
        head = "" if first else "<|im_end|>\n"
        return self._encode(tok, f"{head}<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")

    @property
    def sampled_tokens(self) -> int:
        return self.conversations * self.turns * self.new_tokens


def forward_throughput(model, repeats: int) -> float:
    x = torch.randint(0, model.config.vocab_size, (4, 256))
    best = float("inf")
    with torch.inference_mode():
        model(input_ids=x[:, :32])
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(input_ids=x)
            best = min(best, time.perf_counter() - t0)
    return x.numel() / best


def products_only_seconds(decoder: SlotDecoder, stats: SamplerStats) -> float:
    """Seconds the passes of a run (``stats``) would take if only their products and norms cost time.

    Each pass is replayed through the sampler's own (prepacked) linear products, norms and
    unembedding, with no attention, no KV cache, no draw and no bookkeeping: the decode steps at
    their mean batch, the prefill passes at their mean tokens (as many rows unembedded as a pass
    served requests, on average). No sampler of this model, with these products, can run the
    run's passes faster, so ``sampled tokens / this / forward throughput`` is the ceiling of the
    fraction.
    """

    def products(rows: int, head_rows: int) -> torch.Tensor:
        hidden = torch.randn(max(rows, decoder.min_rows), decoder.embed.shape[1], dtype=decoder.dtype)
        width = decoder.n_heads * decoder.head_dim
        for layer in decoder.layers:
            # The queries' columns stand in for the attention's output.
            attention = layer.qkv(layer.input_norm(hidden))[:, :width].contiguous()
            hidden = layer.o.add(attention, hidden)
            x = layer.post_norm(hidden)
            hidden = layer.down.add(layer.up.mul(x, layer.gate.silu(x)), hidden)
        return decoder._logits(decoder.norm(hidden)[:head_rows])

    def seconds(rows: int, head_rows: int, repeats: int) -> float:
        with torch.inference_mode():
            products(rows, head_rows)
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                products(rows, head_rows)
                best = min(best, time.perf_counter() - t0)
        return best

    decode_rows = max(1, round(stats.mean_batch_size))
    total = stats.decode_steps * on_compute_thread(lambda: seconds(decode_rows, decode_rows, 10))
    if stats.prefill_passes:
        rows = max(1, round(stats.prefilled_tokens / stats.prefill_passes))
        requests = -(-stats.requests // stats.prefill_passes)  # rounded up
        one = on_compute_thread(lambda: seconds(rows, min(rows, requests), 3))
        total += stats.prefill_passes * one
    return total


def run_ours(sampler: LocalSamplingClient, work: Workload) -> tuple[float, float]:
    """(seconds, process CPU seconds) of the workload through the local sampler."""

    async def conversation(c: int) -> None:
        prompt = list(work.first[c])
        for t in range(work.turns):
            params = types.SamplingParams(max_tokens=work.new_tokens, stop=[], seed=1000 * c + t)
            res = await sampler.sample(types.ModelInput.from_ints(prompt), 1, params)
            prompt += res.sequences[0].tokens
            if t + 1 < work.turns:
                prompt += work.follow[c][t + 1]

    async def everything() -> None:
        await asyncio.gather(*[conversation(c) for c in range(work.conversations)])

    sampler.engine.clear_prefix_cache()
    t0, c0 = time.perf_counter(), time.process_time()
    asyncio.run(everything())
    return time.perf_counter() - t0, time.process_time() - c0


def run_hf(model, work: Workload, cache_implementation: str) -> tuple[float, float]:
    """(seconds, process CPU seconds) of the workload as one left-padded ``generate`` batch per turn."""
    pad = 2
    prompts = [list(p) for p in work.first]
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for t in range(work.turns):
            width = max(len(p) for p in prompts)
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
            torch.manual_seed(t)
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                max_new_tokens=work.new_tokens,
                min_new_tokens=work.new_tokens,
                pad_token_id=pad,
                cache_implementation=cache_implementation,
            )
            new = out[:, width:].tolist()
            prompts = [p + n for p, n in zip(prompts, new, strict=True)]
            if t + 1 < work.turns:
                prompts = [p + work.follow[c][t + 1] for c, p in enumerate(prompts)]
    return time.perf_counter() - t0, time.process_time() - c0


def logprob_gap(sampler: LocalSamplingClient, model, work: Workload) -> float:
    """Max |sampled logprob - clean forward logprob| over a few conversations' first turns."""
    gap = 0.0
    for c in range(min(4, work.conversations)):
        prompt = work.first[c]
        params = types.SamplingParams(max_tokens=work.new_tokens, stop=[], seed=c)
        seq = sampler.sample(types.ModelInput.from_ints(prompt), 1, params).result().sequences[0]
        tokens = torch.tensor([prompt + seq.tokens])

        def forward(tokens: torch.Tensor = tokens) -> torch.Tensor:
            with torch.inference_mode():
                return model(input_ids=tokens).logits[0].float()

        logits = on_compute_thread(forward)
        lp = torch.log_softmax(logits, -1)
        ref = [float(lp[len(prompt) - 1 + i, t]) for i, t in enumerate(seq.tokens)]
        assert seq.logprobs is not None
        gap = max(gap, max(abs(a - b) for a, b in zip(seq.logprobs, ref, strict=True)))
    return gap


def conversation_prefill(sampler: LocalSamplingClient, tok, turns: int, reply_tokens: int) -> int:
    before = sampler.stats.prefilled_tokens
    msgs = [{"role": "system", "content": SYSTEM}]
    for turn in range(turns):
        msgs.append({"role": "user", "content": f"Question {turn + 1}: {QUESTIONS[turn % len(QUESTIONS)]}"})
        p = list(tok.encode(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)))
        params = types.SamplingParams(max_tokens=reply_tokens, stop=[2], seed=turn)
        seq = sampler.sample(types.ModelInput.from_ints(p), 1, params).result().sequences[0]
        msgs.append({"role": "assistant", "content": tok.decode([t for t in seq.tokens if t != 2])})
    return sampler.stats.prefilled_tokens - before


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="the tiny test model, 4 conversations x 2 turns x 4 tokens, dynamic cache",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--conversations", type=int, default=32)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--hf-caches", default="dynamic,static", help="cache implementations of generate to try")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model_name = SMOLLM2
    if args.quick:
        args.conversations, args.turns, args.tokens = 4, 2, 4
        model_name, args.hf_caches = TINY, "dynamic"
    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} CPUs, {args.threads} threads, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    )
    tok = load_tokenizer()
    model = on_compute_thread(lambda: pristine_base(model_name))
    auto = resolve_compute_dtype("auto")
    dtypes = ["float32", *([auto] if auto != "float32" else [])]
    print(f"compute dtype auto picks here: {auto}")
    models = {"float32": model}
    for dtype in dtypes[1:]:
        models[dtype] = on_compute_thread(lambda d=dtype: copy.deepcopy(model).to(getattr(torch, d)))
    samplers = {
        dtype: LocalServiceClient(compute_dtype=dtype).create_sampling_client(base_model=model_name).result()
        for dtype in dtypes
    }
    sampler = samplers["float32"]
    work = Workload(tok, args.conversations, args.turns, args.tokens)
    warm = Workload(tok, min(8, args.conversations), 2, args.tokens)
    caches = [c for c in args.hf_caches.split(",") if c]

    fwd = {d: on_compute_thread(lambda m=models[d]: forward_throughput(m, 3)) for d in dtypes}
    for dtype in dtypes:
        print(f"forward ({dtype}): 4 x 256 tokens, {fwd[dtype]:.1f} tok/s")
    for cache in caches:  # warm-up
        on_compute_thread(lambda c=cache: run_hf(model, warm, c))
    for s in samplers.values():
        run_ours(s, warm)

    runs: list[tuple[str, LocalSamplingClient | None, Callable[[], tuple[float, float]]]] = []
    for cache in caches:
        runs.append(
            (
                f"hf generate ({cache} cache)",
                None,
                lambda c=cache: on_compute_thread(lambda: run_hf(model, work, c)),
            )
        )
        for dtype, s in samplers.items():
            runs.append((f"ours ({dtype})", s, lambda s=s: run_ours(s, work)))
    results: dict[str, list[tuple[float, float]]] = {}
    run_stats: dict[str, SamplerStats] = {}
    for name, client, fn in runs:
        if client is not None:
            client.engine.reset_stats()
        wall, cpu = fn()
        results.setdefault(name, []).append((wall, cpu))
        extra = ""
        if client is not None:
            st = client.stats
            run_stats[name] = copy.copy(st)
            extra = (
                f" (prefilled {st.prefilled_tokens}, reused {st.reused_tokens}, {st.prefill_passes} prefill"
                f" passes {st.prefill_s:.1f} s, {st.decode_steps} decode steps {st.decode_s:.1f} s, mean decode"
                f" batch {st.mean_batch_size:.1f}, settling {st.settle_s:.1f} s)"
            )
        print(
            f"{name}: {work.conversations} x {work.turns} x {work.new_tokens} tokens in {wall:.1f} s ="
            f" {work.sampled_tokens / wall:.1f} tok/s, CPU {cpu:.1f} s{extra}"
        )
    for d in dtypes:
        fwd[d] = max(fwd[d], on_compute_thread(lambda m=models[d]: forward_throughput(m, 3)))
        print(f"forward ({d}, best of both measurements): {fwd[d]:.1f} tok/s")
    best = {name: min(w for w, _ in rs) for name, rs in results.items()}
    ours_tps = {d: work.sampled_tokens / best.pop(f"ours ({d})") for d in dtypes}
    peer = min(best, key=lambda k: best[k])
    fraction = {d: ours_tps[d] / fwd[d] for d in dtypes}
    print(
        f"peer at its best: {peer} ({work.sampled_tokens / best[peer]:.1f} tok/s); ours "
        + ", ".join(f"{ours_tps[d]:.1f} tok/s ({d}, {fraction[d]:.3f} of its forward)" for d in dtypes)
    )

    ceiling = {
        d: work.sampled_tokens
        / products_only_seconds(samplers[d].engine.decoder, run_stats[f"ours ({d})"])
        / fwd[d]
        for d in dtypes
    }
    print(
        "ceiling, the same passes with only their products and norms costing time: "
        + ", ".join(f"{ceiling[d]:.3f} of the forward ({d})" for d in dtypes)
    )

    gap = logprob_gap(sampler, model, work)
    print(f"max_abs_logprob_gap_sampler_vs_forward={gap:.2e}")
    plain = LocalServiceClient(prefix_cache_tokens=0).create_sampling_client(base_model=model_name).result()
    turns, reply = (3, 4) if args.quick else (10, 24)
    pre_r = conversation_prefill(sampler, tok, turns, reply)
    pre_n = conversation_prefill(plain, tok, turns, reply)
    print(f"conversation of {turns} turns: prefilled {pre_r} tokens with reuse, {pre_n} without")
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    print(
        f"ratio_vs_hf_batched={ours_tps['float32'] * best[peer] / work.sampled_tokens:.2f} "
        f"fraction_of_forward_throughput={fraction['float32']:.3f} "
        f"fraction_of_forward_throughput_auto={fraction[auto]:.3f} "
        f"ratio_prefill_tokens_reuse_vs_none={pre_r / pre_n:.3f} "
        f"fraction_ceiling_products_only={ceiling['float32']:.3f} "
        f"fraction_ceiling_products_only_auto={ceiling[auto]:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
