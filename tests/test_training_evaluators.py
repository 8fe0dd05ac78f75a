"""``training.Config.evaluator_builders``: the cookbook's own evaluators in our loop (TINY, toy env)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import ClassVar

import pytest
from tinker_cookbook.eval.evaluators import SamplingClientEvaluator
from tinker_cookbook.supervised.nll_evaluator import NLLEvaluator, SamplerNLLEvaluator

import training
from training.testing import ToyConfig

DATUMS = [training.sft_datum([1, 9690, 198, 100, 200, 300, 2], [0, 0, 0, 1, 1, 1, 1])]


class CountingEvaluator(SamplingClientEvaluator):
    """Counts its calls and remembers the samplers it was given."""

    seen: ClassVar[list[object]] = []

    async def __call__(self, sampling_client: object) -> dict[str, float]:
        type(self).seen.append(sampling_client)
        return {"counting/calls": float(len(type(self).seen))}


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_cookbook_evaluators_land_in_metrics_under_their_names(tmp_path: Path) -> None:
    CountingEvaluator.seen = []
    config = ToyConfig(
        log_path=str(tmp_path),
        max_steps=3,
        eval_every=2,
        eval_groups=0,
        learning_rate=1e-2,
        progress=False,
        evaluator_builders=[
            functools.partial(SamplerNLLEvaluator, DATUMS, name="heldout"),
            functools.partial(NLLEvaluator, DATUMS, name="trainer"),
        ],
        infrequent_evaluator_builders=[CountingEvaluator],
        infrequent_eval_every=3,
    )
    training.train(config)
    metrics = rows(tmp_path)
    assert [r["step"] for r in metrics] == [0, 1, 2]
    due = [r for r in metrics if "heldout/nll" in r]
    assert [r["step"] for r in due] == [0, 2]
    assert all("trainer/nll" in r for r in due) and "trainer/nll" not in metrics[1]
    # The sampler and the training client see the same weights: the two NLLs agree.
    for r in due:
        assert r["heldout/nll"] == pytest.approx(r["trainer/nll"], rel=1e-3)
    assert due[0]["heldout/nll"] != due[1]["heldout/nll"]  # the weights moved in between
    assert [r.get("counting/calls") for r in metrics] == [1.0, None, None]
    assert len(CountingEvaluator.seen) == 1


def test_a_builder_of_the_wrong_type_fails_before_training(tmp_path: Path) -> None:
    config = ToyConfig(log_path=str(tmp_path), max_steps=1, progress=False, evaluator_builders=[lambda: 42])
    with pytest.raises(TypeError, match=r"evaluator_builders\[0\] built a int"):
        training.train(config)
    assert not (tmp_path / "metrics.jsonl").exists()
