"""Benchmark of the local training client on SmolLM2-135M (CPU): shared-prefix passes against the
plain padded ones, and (``--vs-plain-torch``) the client against a plain torch + peft loop.

Shared prefixes (default): ``forward_backward`` with ``share_prefixes`` on and off, alternated to
share machine noise, on two batches:

- a batch recorded from a real main-job step (``bench/data/twenty_questions_step0.json.gz``,
  written by ``scripts/record_training_batch.py``: the Twenty Questions main job's first RL step,
  ``importance_sampling``), where the 8 games of a group share their opening;
- a math-shaped batch: groups of 8 answers of 64 tokens after one 256-token prompt, advantages on
  the answers only.

Reported: tokens the shared passes compute over the flat batch's tokens (``y``), the batch's
bound, each distinct prefix token once (``b``), the train-time ratios on the recorded batch
(``x``) and the math batch (``m``), and the largest relative difference of a LoRA weight's
gradient between the two passes in float32 (``z``; LoRA ``B`` made non-zero so every weight has a
gradient; per weight tensor, relative to its norm or to 1% of the whole gradient's, whichever is
larger). Goals: ``y <= b + 0.02``, ``x <= 1.15 b``, ``m <= 0.35``, ``z <= 1e-5``.

Run: ``nice .venv/bin/python bench/local_trainer.py [--quick]`` (``--quick``: the tiny test model,
fewer groups and repeats). The last line is ``ratio_tokens_computed_vs_flat=<y>
ratio_prefix_bound_vs_flat=<b> ratio_train_time_shared_vs_flat=<x>
ratio_train_time_shared_vs_flat_math=<m> max_grad_rel_diff=<z>``. Measured figures go to
``envs/twenty_questions/NOTES.md``.

``--vs-plain-torch``: both run ``forward_backward`` (cross-entropy, summed) on the same padded
batch with the same LoRA setup; tokens/s are compared, alternating the two. Also times the same
batch as RL datums (``importance_sampling``, advantages zero on the first 70% of each sequence)
with float32 and with ``compute_dtype="bfloat16"``, and reports the max abs gap between sampler
logprobs and training ``forward`` logprobs on the same tokens. The plain loop runs on the
backend's compute thread, as ours does, so the process has one OpenMP thread pool (a second one
slows both sides: see ``bench/compute_thread.py``). Its last line is ``ratio_vs_plain_torch=<z>``
(goal >= 0.9).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from tinker import types

from backend import SMOLLM2, TINY, LocalServiceClient, load_tokenizer
from backend.local._device import run as on_compute_thread
from backend.local._prefix import prefix_bound
from backend.local._trainer import ATTN_MODULES, MLP_MODULES, TrainerCore
from backend.local._weights import fresh_base

RECORDED = Path(__file__).resolve().parent / "data" / "twenty_questions_step0.json.gz"

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


def vs_plain_torch(args: argparse.Namespace) -> int:
    """The client against a plain torch + peft loop (module docstring)."""
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


def recorded_batch(path: Path) -> tuple[str, list[types.Datum]]:
    """The loss and datums written by ``scripts/record_training_batch.py``."""
    with gzip.open(path, "rt") as f:
        raw = json.load(f)
    data = [
        types.Datum(
            model_input=types.ModelInput.from_ints(d["model_input"]),
            loss_fn_inputs=d["loss_fn_inputs"],
        )
        for d in raw["datums"]
    ]
    return raw["loss_fn"], data


def math_batch(
    tok, groups: int, prompt_len: int = 256, answer_len: int = 64, group_size: int = 8
) -> list[types.Datum]:
    """Groups of ``group_size`` answers of ``answer_len`` tokens after one ``prompt_len``-token
    prompt; advantages on the answer tokens only (RL datums, as the cookbook builds them)."""
    text = tok.encode(TEXT * 60)
    data = []
    for g in range(groups):
        prompt = text[g * 13 : g * 13 + prompt_len]
        for j in range(group_size):
            start = 200 + 31 * (g * group_size + j)
            seq = prompt + text[start : start + answer_len]
            n = len(seq) - 1
            adv = 0.5 if j % 2 else -0.5
            data.append(
                types.Datum(
                    model_input=types.ModelInput.from_ints(seq[:-1]),
                    loss_fn_inputs={  # type: ignore[dict-item]
                        "target_tokens": seq[1:],
                        "logprobs": [-2.0] * n,
                        "advantages": [0.0] * (prompt_len - 1) + [adv] * (n - prompt_len + 1),
                    },
                )
            )
    return data


def grads_of(core: TrainerCore, data: list[types.Datum], loss_fn: str, share: bool) -> list[torch.Tensor]:
    core.share_prefixes = share
    core.model.zero_grad(set_to_none=True)
    core.forward_backward(data, loss_fn, None, backward=True)
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in core.params]
    core.model.zero_grad(set_to_none=True)
    return grads


def grad_rel_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """Largest per-tensor ``|a - b| / max(|a|, 1% of the whole gradient's norm)``."""
    total = float(torch.cat([g.reshape(-1) for g in a]).norm())
    return max(
        float((x - y).norm()) / max(float(x.norm()), 1e-2 * total, 1e-30) for x, y in zip(a, b, strict=True)
    )


def time_ratio(
    core: TrainerCore, data: list[types.Datum], loss_fn: str, reps: int, warmup: bool
) -> tuple[float, float, float]:
    """Seconds of ``forward_backward`` with shared prefixes and without (alternated), and the
    relative gradient difference between the two (:func:`grad_rel_diff`, last repeat). Also
    prints the two sides' process CPU seconds: on a loaded machine their ratio is the steadier
    figure (wall time there measures the neighbours too)."""
    times = {True: 0.0, False: 0.0}
    cpu = {True: 0.0, False: 0.0}
    if warmup:
        for share in (True, False):
            grads_of(core, data, loss_fn, share)
    grads: dict[bool, list[torch.Tensor]] = {}
    for _ in range(reps):
        for share in (True, False):
            core.share_prefixes = share
            core.model.zero_grad(set_to_none=True)
            t0, c0 = time.perf_counter(), time.process_time()
            core.forward_backward(data, loss_fn, None, backward=True)
            times[share] += time.perf_counter() - t0
            cpu[share] += time.process_time() - c0
            grads[share] = [
                p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in core.params
            ]
    core.model.zero_grad(set_to_none=True)
    core.share_prefixes = True
    print(
        f"  CPU seconds shared {cpu[True] / reps:.2f}, flat {cpu[False] / reps:.2f} per forward_backward "
        f"(ratio {cpu[True] / cpu[False]:.3f}; load average {os.getloadavg()[0]:.1f})"
    )
    return times[True], times[False], grad_rel_diff(grads[False], grads[True])


def shared_prefixes(args: argparse.Namespace) -> int:
    """Shared-prefix passes against plain ones (module docstring)."""
    model = TINY if args.quick else SMOLLM2
    reps = 1 if args.quick else args.reps
    tok = load_tokenizer()
    core = TrainerCore(model, rank=16, seed=0)
    with torch.no_grad(), torch.random.fork_rng():  # B != 0: every LoRA weight gets a gradient
        torch.manual_seed(0)
        for name, p in core.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 1e-3)
    loss_fn, recorded = recorded_batch(args.recorded)
    math = math_batch(tok, 2 if args.quick else args.math_groups)
    seqs = [d.model_input.to_ints() for d in recorded]
    flat = sum(len(s) for s in seqs)
    computed = core.plan(core.prepare(recorded, loss_fn)).tokens
    bound = prefix_bound(seqs)
    y, b = computed / flat, bound / flat
    print(
        f"recorded batch ({args.recorded.name}): {len(seqs)} datums, {flat} tokens; shared passes compute "
        f"{computed}, bound {bound}"
    )
    shared_t, flat_t, z_recorded = time_ratio(core, recorded, loss_fn, reps, not args.no_warmup)
    print(
        f"recorded batch: shared {shared_t / reps:.2f} s, flat {flat_t / reps:.2f} s per forward_backward; "
        f"gradient relative difference {z_recorded:.2e} (float32)"
    )
    x = shared_t / flat_t
    math_seqs = [d.model_input.to_ints() for d in math]
    print(
        f"math batch: {len(math)} datums, {sum(len(s) for s in math_seqs)} tokens, bound {prefix_bound(math_seqs)}"
    )
    shared_m, flat_m, z_math = time_ratio(core, math, "importance_sampling", reps, not args.no_warmup)
    print(
        f"math batch: shared {shared_m / reps:.2f} s, flat {flat_m / reps:.2f} s per forward_backward; "
        f"gradient relative difference {z_math:.2e} (float32)"
    )
    z = max(z_recorded, z_math)
    m = shared_m / flat_m
    print(
        f"ratio_tokens_computed_vs_flat={y:.3f} ratio_prefix_bound_vs_flat={b:.3f} "
        f"ratio_train_time_shared_vs_flat={x:.3f} ratio_train_time_shared_vs_flat_math={m:.3f} "
        f"max_grad_rel_diff={z:.2e}"
    )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the tiny test model, fewer groups and repeats")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-warmup", action="store_true", help="time the first passes too")
    ap.add_argument("--math-groups", type=int, default=4)
    ap.add_argument("--recorded", type=Path, default=RECORDED)
    ap.add_argument("--vs-plain-torch", action="store_true", help="the client against torch + peft")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.vs_plain_torch:
        return vs_plain_torch(args)
    return shared_prefixes(args)


if __name__ == "__main__":
    raise SystemExit(main())
