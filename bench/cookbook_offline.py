"""The cookbook's own trainers and evaluators, unchanged, on the embedded model, offline.

Runs inside :func:`backend.use_local_backend` (nothing reaches the network; ``HF_HUB_OFFLINE=1``):

(a) ``tinker_cookbook.rl.train.main`` on our Twenty Questions builder for 2 steps;
(b) ``tinker_cookbook.supervised.train.main`` on a small chat JSONL (the shipped
    ``envs/judge/data/sft_chats.jsonl``) for a few steps;
(c) ``tinker_cookbook.preference.train_dpo.main`` on the pairs that ``python -m envs.judge.preference``
    makes (SL warm start -> the SL policy's answers judged in pairs -> DPO from the SL checkpoint);
    loss and margin are measured on the held-out pairs, at the reference and after DPO;
(d) one Inspect AI task (our GSM8K-style task from a local file, scored by our math grader)
    through the cookbook's Inspect bridge on the local sampler.

Run: ``nice .venv/bin/python bench/cookbook_offline.py [--out runs/bench_cookbook] [--quick]``
(``--quick``: the tiny random model and small sizes, a smoke test of the script). The last line is
``cookbook_rl_steps=<n> cookbook_sl_steps=<n> dpo_loss_first=<x> dpo_loss_last=<y>
dpo_margin_gain=<z> inspect_samples=<n>`` (goals: >= 2, >= 2, last < first, gain > 0, >= 20).

The figures measured so far are in ``docs/measurements.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend import SMOLLM2, TINY, use_local_backend

RENDERER = "qwen3_instruct"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_rl(out: Path, model: str, quick: bool) -> int:
    from tinker_cookbook.rl import train as rl_train

    from envs.twenty_questions import TwentyQuestionsDatasetBuilder

    config = rl_train.Config(
        learning_rate=1e-4,
        dataset_builder=TwentyQuestionsDatasetBuilder(
            batch_size=2,
            group_size=2 if quick else 4,
            model_name_for_tokenizer=model,
            renderer_name=RENDERER,
            num_batches=2,
            test_batch_size=2,
            test_group_size=2,
        ),
        model_name=model,
        renderer_name=RENDERER,
        recipe_name="bench_cookbook_offline",
        max_tokens=8 if quick else 16,
        lora_rank=8,
        eval_every=0,
        save_every=0,
        log_path=str(out / "rl"),
    )
    with use_local_backend(out / "checkpoints"):
        asyncio.run(rl_train.main(config))
    return len(rows(out / "rl" / "metrics.jsonl"))


def run_sl(out: Path, model: str) -> tuple[int, float, float]:
    from tinker_cookbook.supervised import train as sl_train
    from tinker_cookbook.supervised.data import FromConversationFileBuilder
    from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig

    from envs.judge.preference import SFT_FILE

    common = ChatDatasetBuilderCommonConfig(
        model_name_for_tokenizer=model, renderer_name=RENDERER, max_length=512, batch_size=8
    )
    config = sl_train.Config(
        log_path=str(out / "sl"),
        model_name=model,
        renderer_name=RENDERER,
        recipe_name="bench_cookbook_offline",
        dataset_builder=FromConversationFileBuilder(common_config=common, file_path=str(SFT_FILE)),
        lora_rank=8,
        learning_rate=3e-4,
        num_epochs=2,
        eval_every=0,
        save_every=0,
    )
    with use_local_backend(out / "checkpoints"):
        asyncio.run(sl_train.main(config))
    metrics = rows(out / "sl" / "metrics.jsonl")
    return len(metrics), metrics[0]["train_mean_nll"], metrics[-1]["train_mean_nll"]


def run_dpo(out: Path, model: str, quick: bool) -> dict:
    from envs.judge.preference import PreferenceConfig, run_pipeline

    if quick:
        import envs.judge.testing  # noqa: F401  (registers the scripted: judges)

    extra = (
        {
            "judge": "scripted:longer",
            "sft_steps": 2,
            "groups_per_prompt": 1,
            "group_size": 2,
            "pairs_per_group": 1,
            "n_test_prompts": 4,
            "max_tokens": 8,
            "dpo_epochs": 1,
        }
        if quick
        else {}
    )
    return run_pipeline(PreferenceConfig(log_path=str(out / "preference"), model_name=model, **extra))


def run_inspect(out: Path, model: str, quick: bool) -> dict:
    import anyio

    from envs.math.eval import EvalConfig, run_inspect_eval

    config = EvalConfig(
        harness="inspect",
        model_name=model,
        n_test=4 if quick else 20,
        max_tokens=8 if quick else 48,
        output=str(out / "inspect" / "eval.json"),
        progress=False,
    )
    summary, _ = anyio.run(run_inspect_eval, config)
    return {"samples": summary.n, "accuracy": summary.accuracy, "metrics": summary.extra["metrics"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", default="runs/bench_cookbook")
    parser.add_argument("--quick", action="store_true", help="tiny random model, small sizes")
    parser.add_argument("--keep", action="store_true", help="keep an existing --out (resume the pipeline)")
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists() and not args.keep:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    model = TINY if args.quick else SMOLLM2
    load = os.getloadavg()
    times: dict[str, float] = {}

    t = time.monotonic()
    rl_steps = run_rl(out, model, args.quick)
    times["rl"] = time.monotonic() - t
    print(f"(a) cookbook rl.train.main: {rl_steps} steps in {times['rl']:.0f}s", flush=True)

    t = time.monotonic()
    sl_steps, nll_first, nll_last = run_sl(out, model)
    times["sl"] = time.monotonic() - t
    print(
        f"(b) cookbook supervised.train.main: {sl_steps} steps, train_mean_nll {nll_first:.3f} -> {nll_last:.3f} "
        f"in {times['sl']:.0f}s",
        flush=True,
    )

    t = time.monotonic()
    pref = run_dpo(out, model, args.quick)
    times["dpo_pipeline"] = time.monotonic() - t
    dpo = pref["dpo"]
    print(
        f"(c) preference pipeline: SL loss/token {pref['sl']['warm_start/loss_first']:.3f} -> "
        f"{pref['sl']['warm_start/loss_last']:.3f}; {pref['pairs']['train/pairs']:.0f} train / "
        f"{pref['pairs']['test/pairs']:.0f} held-out judged pairs; cookbook train_dpo: {dpo['steps']} steps, "
        f"train dpo_loss {dpo['train_dpo_loss_first']:.4f} -> {dpo['train_dpo_loss_last']:.4f}; held-out "
        f"{json.dumps(dpo['heldout_before'])} -> {json.dumps(dpo['heldout_after'])} in {times['dpo_pipeline']:.0f}s",
        flush=True,
    )

    t = time.monotonic()
    inspect = run_inspect(out, model, args.quick)
    times["inspect"] = time.monotonic() - t
    print(
        f"(d) Inspect gsm8k task via the cookbook bridge: {inspect['samples']} samples, "
        f"{json.dumps(inspect['metrics'])} in {times['inspect']:.0f}s",
        flush=True,
    )
    print(
        f"model={model} load_at_start={load[0]:.1f} load_at_end={os.getloadavg()[0]:.1f} seconds={json.dumps(times)}"
    )
    print(
        f"cookbook_rl_steps={rl_steps} cookbook_sl_steps={sl_steps} "
        f"dpo_loss_first={pref['dpo_loss_first']:.4f} dpo_loss_last={pref['dpo_loss_last']:.4f} "
        f"dpo_margin_gain={pref['dpo_margin_gain']:.4f} inspect_samples={inspect['samples']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
