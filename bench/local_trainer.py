"""Benchmark of the local training client on SmolLM2-135M (CPU) vs a plain torch + peft loop.

Both run ``forward_backward`` (cross-entropy, summed) on the same padded batch with the same LoRA
setup; tokens/s are compared, alternating the two to share machine noise. Also reports the max
abs gap between sampler logprobs and training ``forward`` logprobs on the same tokens.

Also times the same batch as RL datums (``importance_sampling``, advantages zero on the first 70%
of each sequence, like observation tokens) with float32 and with ``compute_dtype="bfloat16"``.

The plain loop runs on the backend's compute thread, as ours does, so the process has one OpenMP
thread pool (a second one slows both sides: see ``bench/compute_thread.py``).

Run: ``nice .venv/bin/python bench/local_trainer.py [--quick]``. The last line is
``ratio_vs_plain_torch=<z>`` (goal >= 0.9).

Measured (Intel Xeon with AMX, 2 threads, idle, 2026-12-05, main at 6a091f5, both sides on the
compute thread): 8 sequences, 1944 tokens, 2 passes; ours 297.2 tok/s, plain torch + peft 245.8
tok/s (same loss, 2155.038); RL datums 323.0 tok/s in float32, 465.6 in bfloat16
(``ratio_bfloat16_vs_float32_rl=1.44``); sampler vs forward logprob gap 1.12e-05:
``ratio_vs_plain_torch=1.21``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from tinker import types

from backend import SMOLLM2, LocalServiceClient, load_tokenizer
from backend.local._device import run as on_compute_thread
from backend.local._trainer import ATTN_MODULES, MLP_MODULES
from backend.local._weights import fresh_base

TEXT = (
    "The local backend trains LoRA adapters on a small language model. It batches data into padded "
    "passes, accumulates gradients, and applies AdamW when asked to step. "
)


def make_batch(tok, n: int, length: int) -> list[list[int]]:
    base = tok.encode(TEXT * 20)
    return [base[i * 7 : i * 7 + length - (i % 4) * 8] for i in range(n)]


def plain_loop_fn(rank: int):
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(
        fresh_base(SMOLLM2),
        LoraConfig(
            r=rank, lora_alpha=2 * rank, target_modules=[*ATTN_MODULES, *MLP_MODULES], lora_dropout=0.0
        ),
    )
    model.train()

    def step(seqs: list[list[int]]) -> float:
        length = max(len(s) for s in seqs) - 1
        ids = torch.full((len(seqs), length), 2, dtype=torch.long)
        mask = torch.zeros_like(ids)
        labels = torch.full_like(ids, -100)
        for i, s in enumerate(seqs):
            ids[i, : len(s) - 1] = torch.tensor(s[:-1])
            mask[i, : len(s) - 1] = 1
            labels[i, : len(s) - 1] = torch.tensor(s[1:])
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100, reduction="sum"
        )
        loss.backward()
        model.zero_grad(set_to_none=True)
        return float(loss.detach())

    return step


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller batch, fewer repeats")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n, length, reps = (4, 128, 2) if args.quick else (8, 256, 3)
    rank = 16
    tok = load_tokenizer()
    seqs = make_batch(tok, n, length)
    data = [
        types.Datum(model_input=types.ModelInput.from_ints(s[:-1]), loss_fn_inputs={"target_tokens": s[1:]})  # type: ignore[dict-item]
        for s in seqs
    ]
    tokens = sum(len(s) - 1 for s in seqs)
    service = LocalServiceClient()
    trainer = service.create_lora_training_client(SMOLLM2, rank=rank, seed=0).result()
    plain_step = on_compute_thread(lambda: plain_loop_fn(rank))

    def plain(seqs: list[list[int]]) -> float:
        return on_compute_thread(lambda: plain_step(seqs))

    ours_loss = trainer.forward_backward(data, "cross_entropy").result().metrics["loss:sum"]  # warm-up
    plain_loss = plain(seqs)
    print(f"loss ours={ours_loss:.3f} plain={plain_loss:.3f} (same base, B=0 LoRA)")
    t_ours = t_plain = 0.0
    for _ in range(reps):
        t0 = time.perf_counter()
        trainer.forward_backward(data, "cross_entropy").result()
        t_ours += time.perf_counter() - t0
        t0 = time.perf_counter()
        plain(seqs)
        t_plain += time.perf_counter() - t0
    ours_tps = reps * tokens / t_ours
    plain_tps = reps * tokens / t_plain
    print(
        f"batch: {n} sequences, {tokens} tokens, {len(trainer.core._passes(trainer.core.prepare(data, 'cross_entropy')))} pass(es)"
    )
    print(f"local forward_backward: {ours_tps:.1f} tok/s")
    print(f"plain torch+peft: {plain_tps:.1f} tok/s")

    # RL datums: observation positions (advantage 0) skip the unembedding's graph; bf16 autocast.
    rl_data = [
        types.Datum(
            model_input=types.ModelInput.from_ints(s[:-1]),
            loss_fn_inputs={  # type: ignore[dict-item]
                "target_tokens": s[1:],
                "logprobs": [-2.0] * (len(s) - 1),
                "advantages": [0.0 if i < 0.7 * len(s) else 0.5 for i in range(len(s) - 1)],
            },
        )
        for s in seqs
    ]
    bf16_trainer = (
        LocalServiceClient(compute_dtype="bfloat16")
        .create_lora_training_client(SMOLLM2, rank=rank, seed=0)
        .result()
    )
    rl_times = {"float32": 0.0, "bfloat16": 0.0}
    for client in (trainer, bf16_trainer):  # warm-up
        client.forward_backward(rl_data, "importance_sampling").result()
    for _ in range(reps):
        for name, client in (("float32", trainer), ("bfloat16", bf16_trainer)):
            t0 = time.perf_counter()
            client.forward_backward(rl_data, "importance_sampling").result()
            rl_times[name] += time.perf_counter() - t0
    for name, seconds in rl_times.items():
        print(f"local forward_backward, RL datums, {name}: {reps * tokens / seconds:.1f} tok/s")
    print(f"ratio_bfloat16_vs_float32_rl={rl_times['float32'] / rl_times['bfloat16']:.2f}")

    # Sampler vs training forward logprobs on the same tokens.
    sampler = trainer.save_weights_and_get_sampling_client().result()
    chat = tok.apply_chat_template(
        [{"role": "user", "content": "Hi!"}], add_generation_prompt=True, tokenize=False
    )
    assert isinstance(chat, str)
    p = tok.encode(chat)
    seq = sampler.sample(
        types.ModelInput.from_ints(p), 1, types.SamplingParams(max_tokens=16, seed=0)
    ).result()
    s = seq.sequences[0]
    full = p + s.tokens
    fwd = trainer.forward(
        [
            types.Datum(
                model_input=types.ModelInput.from_ints(full[:-1]),
                loss_fn_inputs={"target_tokens": full[1:]},  # type: ignore[dict-item]
            )
        ],
        "cross_entropy",
    ).result()
    train_lp = fwd.loss_fn_outputs[0]["logprobs"].tolist()[len(p) - 1 :]
    assert s.logprobs is not None
    gap = max(abs(a - b) for a, b in zip(s.logprobs, train_lp, strict=True))
    print(f"max_abs_logprob_gap_sampler_vs_forward={gap:.2e}")
    print(f"ratio_vs_plain_torch={ours_tps / plain_tps:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
