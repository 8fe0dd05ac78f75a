"""``python -m envs.distill``: teacher (model + long prompt) -> student by SL without the prompt ->
held-out accuracies (TINY, tiny sizes; the figures come from ``bench/seed_workflows.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.distill.pipeline import LANGUAGES_FILE, accuracy, first_label, load_sentences, main

TINY = "turngym/tiny-random-llama"


def test_labels_and_split() -> None:
    assert first_label("It is French, not German.") == "French"
    assert first_label("german") == "German" and first_label("Frenchman") is None
    train, test = load_sentences(LANGUAGES_FILE)
    assert len(train) == 48 and len(test) == 16
    assert {r["label"] for r in test} == {"English", "French", "Spanish", "German"}
    assert accuracy(["English", "Spanish"], [{"label": "English"}, {"label": "French"}]) == 0.5


def test_bad_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "en-01", "text": "hi", "label": "Klingon"}\n')
    assert main([f"log_path={tmp_path / 'run'}", f"model_name={TINY}", f"data_path={bad}"]) == 1
    assert "bad.jsonl:1: expected" in capsys.readouterr().err


def test_distillation_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [f"log_path={tmp_path}", f"model_name={TINY}", "lora_rank=2", "steps=2", "max_tokens=3"]
    assert main(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("unprompted_accuracy="))
    assert "teacher_accuracy=" in line and "distill_recovery=" in line
    teacher = [json.loads(x) for x in (tmp_path / "teacher.jsonl").read_text().splitlines()]
    assert len(teacher) == 48
    assert all(len(r["messages"]) == 2 and r["messages"][0]["role"] == "user" for r in teacher)  # no prompt
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["student"]["sampler_path"].startswith("local://")
    assert summary["heldout_sentences"] == 16
