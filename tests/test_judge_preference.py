"""``python -m envs.judge.preference``: SL warm start -> pairwise-judged pairs -> the cookbook's DPO,
offline (TINY policy; the scripted judge that prefers the longer answer, so labels are checkable)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from tinker_cookbook.preference.preference_datasets import ComparisonBuilderFromJsonl

import envs.judge.testing  # noqa: F401  (registers the scripted: judges)
from envs.judge.preference import (
    PreferenceConfig,
    answer_seed,
    main,
    run_pipeline,
    sft_datums,
)

TINY = "turngym/tiny-random-llama"


def test_bad_keys_and_files_fail_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bogus=1"]) == 2
    assert main([f"log_path={tmp_path}", f"model_name={TINY}", f"sft_path={tmp_path / 'none.jsonl'}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "bogus" in err[0] and "chat file not found" in err[1]


def test_sft_datums_weight_the_assistant_only(renderer) -> None:  # type: ignore[no-untyped-def]
    from envs.judge.preference import SFT_FILE

    datums = sft_datums(SFT_FILE, renderer)
    assert len(datums) == 24
    weights = datums[0].loss_fn_inputs["weights"].to_torch()
    assert 0 < float(weights.sum()) < len(weights) and float(weights[0]) == 0.0


def test_sft_datums_train_every_reply_of_a_multi_turn_chat(renderer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    chat = {
        "messages": [
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": "Crimson"},
            {"role": "user", "content": "Another one."},
            {"role": "assistant", "content": "Turquoise"},
        ]
    }
    path = tmp_path / "two_turns.jsonl"
    path.write_text(json.dumps(chat) + "\n")
    (datum,) = sft_datums(path, renderer)
    tokens = datum.loss_fn_inputs["target_tokens"].to_torch().tolist()
    weights = datum.loss_fn_inputs["weights"].to_torch().tolist()
    trained = renderer.tokenizer.decode([t for t, w in zip(tokens, weights, strict=True) if w > 0])
    assert "Crimson" in trained and "Turquoise" in trained
    assert "colour" not in trained and "Another" not in trained
    (last_only,) = sft_datums(path, renderer, train_on_what="last_assistant_message")
    kept = [
        t
        for t, w in zip(tokens, last_only.loss_fn_inputs["weights"].to_torch().tolist(), strict=True)
        if w > 0
    ]
    assert "Crimson" not in renderer.tokenizer.decode(kept)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, PreferenceConfig]:
    out = tmp_path_factory.mktemp("preference")
    config = PreferenceConfig(
        log_path=str(out),
        model_name=TINY,
        judge="scripted:longer",
        lora_rank=4,
        sft_steps=2,
        n_test_prompts=6,
        groups_per_prompt=1,
        max_tokens=8,
        dpo_epochs=1,
        dpo_learning_rate=1e-2,
    )
    return out, run_pipeline(config), config


def test_pairs_are_in_the_cookbook_format_and_follow_the_judge(
    pipeline: tuple[Path, dict, PreferenceConfig],
) -> None:
    out, summary, _config = pipeline
    train, test = ComparisonBuilderFromJsonl(
        train_path=str(out / "pairs" / "train.jsonl"), test_path=str(out / "pairs" / "test.jsonl")
    ).get_labeled_comparisons()
    assert test is not None and len(train) == summary["pairs"]["train/pairs"] > 0
    assert len(test) == summary["pairs"]["test/pairs"] > 0
    for labeled in [*train, *test]:
        c = labeled.comparison
        chosen, rejected = (
            (c.completion_A, c.completion_B) if labeled.label == "A" else (c.completion_B, c.completion_A)
        )
        # The judge prefers the longer answer (as it sees it: the transcript, stripped).
        assert len(str(chosen[0]["content"]).strip()) >= len(str(rejected[0]["content"]).strip())
    raw = [json.loads(line) for line in (out / "pairs" / "train.jsonl").read_text().splitlines()]
    assert all(r["win_rates"][0] > r["win_rates"][1] for r in raw)
    assert {lc.label for lc in train} == {"A", "B"}  # the chosen answer is not always shown first


def test_dpo_ran_from_the_sl_checkpoint_with_the_held_out_evaluator(
    pipeline: tuple[Path, dict, PreferenceConfig],
) -> None:
    out, summary, _config = pipeline
    assert summary["sl"]["state_path"].startswith("local://")
    dpo_rows = [json.loads(line) for line in (out / "dpo" / "metrics.jsonl").read_text().splitlines()]
    assert summary["dpo"]["steps"] == len(dpo_rows) >= 1
    assert "heldout/dpo_loss" in dpo_rows[0]  # the evaluator ran inside the cookbook's trainer
    before, after = summary["dpo"]["heldout_before"], summary["dpo"]["heldout_after"]
    # At the reference the policy is the SL model itself: loss log 2, margin 0.
    assert before["heldout/dpo_loss"] == pytest.approx(math.log(2), abs=1e-4)
    assert before["heldout/log_ratio_margin"] == pytest.approx(0.0, abs=1e-4)
    assert after["heldout/log_ratio_margin"] != pytest.approx(0.0, abs=1e-6)
    assert summary["dpo_loss_first"] == before["heldout/dpo_loss"]
    assert json.loads((out / "summary.json").read_text())["dpo_margin_gain"] == summary["dpo_margin_gain"]


def test_a_rerun_resumes_every_stage(pipeline: tuple[Path, dict, PreferenceConfig]) -> None:
    out, summary, config = pipeline
    sl_record = (out / "sl" / "sl.json").read_text()
    pairs = (out / "pairs" / "train.jsonl").read_text()
    again = run_pipeline(config)
    assert (out / "sl" / "sl.json").read_text() == sl_record and (
        out / "pairs" / "train.jsonl"
    ).read_text() == pairs
    assert again["dpo"]["steps"] == summary["dpo"]["steps"]  # the cookbook's DPO run was complete


def test_answer_seeds_are_stable_distinct_and_int32() -> None:
    seeds = {answer_seed(0, "pref-00", g, i) for g in range(2) for i in range(4)}
    assert len(seeds) == 8 and all(0 <= s < 2**31 for s in seeds)
    assert (
        answer_seed(0, "pref-00", 1, 3) == answer_seed(0, "pref-00", 1, 3) != answer_seed(1, "pref-00", 1, 3)
    )


def test_the_pairs_are_the_same_on_a_second_run(pipeline: tuple[Path, dict, PreferenceConfig]) -> None:
    """Seeded answers and a deterministic judge: the preference stage redone from the same SL
    sampler writes the same pairs (before seeding, which answer went where varied with timing)."""
    import asyncio

    import tinker

    from backend.offline import use_local_backend
    from envs.judge.preference import _preference_step

    out, summary, config = pipeline
    again = out / "pairs_again"
    with use_local_backend(out / "checkpoints", compute_dtype=config.compute_dtype):
        service = tinker.ServiceClient()
        asyncio.run(_preference_step(config, service, summary["sl"]["sampler_path"], again))
    for name in ("train.jsonl", "test.jsonl"):
        assert (again / name).read_text() == (out / "pairs" / name).read_text()


def test_dpo_on_the_shipped_comparisons_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``dataset=<comparisons.jsonl>``: no judging; the file is split by prompt and DPO runs on it."""
    from envs.judge.comparisons import COMPARISONS_FILE, load_comparisons

    args = [
        f"log_path={tmp_path}",
        f"model_name={TINY}",
        f"dataset={COMPARISONS_FILE}",
        "dataset_max_pairs=24",
        "n_test_prompts=3",
        "lora_rank=2",
        "sft_steps=1",
        "dpo_batch_size=8",
        "dpo_max_steps=2",
    ]
    assert main(args) == 0
    assert "dpo_loss_first=" in capsys.readouterr().out
    train = load_comparisons(tmp_path / "pairs" / "train.jsonl")
    test = load_comparisons(tmp_path / "pairs" / "test.jsonl")
    assert len(train) + len(test) == 24 and test
    prompts = {json.dumps(r["comparison"]["prompt_conversation"]) for r in train}
    assert not prompts & {json.dumps(r["comparison"]["prompt_conversation"]) for r in test}
    assert json.loads((tmp_path / "summary.json").read_text())["dpo"]["steps"] == 2


def test_named_dataset_offline_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from envs.judge.comparisons import split_comparisons

    with pytest.raises(RuntimeError, match=r"dataset=hhh needs the Hugging Face hub"):
        split_comparisons("hhh", tmp_path, n_test_prompts=1, seed=0, max_pairs=4)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"comparison": {}, "label": "A"}\n')
    assert main([f"log_path={tmp_path / 'run'}", f"model_name={TINY}", f"dataset={bad}", "sft_steps=1"]) == 1
    assert "bad.jsonl:1: expected" in capsys.readouterr().err
