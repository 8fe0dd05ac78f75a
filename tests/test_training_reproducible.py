"""Reproducible runs: the same seed gives the same sampled tokens and metrics (TINY model).

Two runs of the real loop (:mod:`training.testing`'s parity env, 2 steps with evaluations) with
one seed must agree on every metric that is not a timing, on every evaluation and on every
transcript (the sampled tokens); a third run with another seed must not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import training
from training._logging import read_rows
from training.testing import ToyConfig


def _run(path: Path, seed: int) -> Path:
    training.train(ToyConfig(log_path=str(path), max_steps=2, eval_every=1, seed=seed, progress=False))
    return path


def _untimed(path: Path, name: str) -> list[dict[str, object]]:
    def timing(key: str) -> bool:
        return "time/" in key or key.endswith("/time") or "per_second" in key

    return [{k: v for k, v in row.items() if not timing(k)} for row in read_rows(path / name)]


def _transcripts(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((path / "transcripts").glob("*.html"))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("repro")
    return _run(root / "a", 3), _run(root / "b", 3), _run(root / "c", 4)


def test_same_seed_same_tokens_and_metrics(runs: tuple[Path, Path, Path]) -> None:
    a, b, _ = runs
    assert len(_untimed(a, "metrics.jsonl")) == 2
    assert _untimed(a, "metrics.jsonl") == _untimed(b, "metrics.jsonl")
    assert _untimed(a, "eval.jsonl") == _untimed(b, "eval.jsonl")
    assert _transcripts(a) and _transcripts(a) == _transcripts(b)


def test_the_run_logs_its_compute_dtype_choice(runs: tuple[Path, Path, Path]) -> None:
    a, _, _ = runs  # ToyConfig keeps the default local_compute_dtype=auto
    log = (a / "train.log").read_text()
    assert "local compute dtype: auto -> " in log


def test_another_seed_samples_otherwise(runs: tuple[Path, Path, Path]) -> None:
    a, _, c = runs
    assert _transcripts(a) != _transcripts(c)
    assert _untimed(a, "metrics.jsonl") != _untimed(c, "metrics.jsonl")
