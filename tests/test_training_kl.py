"""The KL penalty to the reference policy (``kl_penalty_coef``, ``training._kl``): no effect at 0,
the cookbook's advantage change otherwise, and a tiny-model run that keeps its reference across a
resume."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import tinker
import torch

import training
from training._kl import KL_REFERENCE_FILE, METRIC_KL, apply_kl_penalty
from training._logging import read_rows
from training.testing import ToyConfig


def _datum(tokens: list[int], n_obs: int, seed: int) -> tinker.Datum:
    """A datum of ``tokens`` (shifted as the cookbook's): the first ``n_obs`` targets observed
    (mask 0), the rest sampled, with random sampled logprobs and advantages."""
    g = torch.Generator().manual_seed(seed)
    n = len(tokens) - 1
    mask = torch.tensor([0.0] * n_obs + [1.0] * (n - n_obs))
    return tinker.Datum(
        model_input=tinker.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={
            "target_tokens": tinker.TensorData.from_torch(torch.tensor(tokens[1:])),
            "logprobs": tinker.TensorData.from_torch(-torch.rand(n, generator=g) * 3 * mask),
            "advantages": tinker.TensorData.from_torch(torch.randn(n, generator=g) * mask),
            "mask": tinker.TensorData.from_torch(mask),
        },
    )


class _Reference:
    """A reference sampling client with fixed logprobs per full sequence (None for the first
    token, as ``compute_logprobs`` returns); counts its calls."""

    def __init__(self, logprobs: dict[tuple[int, ...], list[float]]) -> None:
        self.logprobs = logprobs
        self.calls = 0

    async def compute_logprobs_async(self, prompt: tinker.ModelInput) -> list[float | None]:
        self.calls += 1
        return [None, *self.logprobs[tuple(prompt.to_ints())]]


def _case() -> tuple[list[tinker.Datum], _Reference]:
    sequences = [[5, 6, 7, 8, 9, 10], [5, 6, 11, 12], [3, 4, 4, 4, 4, 4, 4]]
    datums = [_datum(s, n_obs=2, seed=i) for i, s in enumerate(sequences)]
    g = torch.Generator().manual_seed(99)
    reference = _Reference({tuple(s): (-torch.rand(len(s) - 1, generator=g) * 3).tolist() for s in sequences})
    return datums, reference


def _inputs(datum: tinker.Datum) -> dict[str, torch.Tensor]:
    return {k: v.to_torch() for k, v in datum.loss_fn_inputs.items()}


def test_zero_coef_leaves_the_datums_bit_identical_and_asks_nothing() -> None:
    datums, reference = _case()
    before = copy.deepcopy(datums)
    assert asyncio.run(apply_kl_penalty(datums, reference, 0.0)) == {}
    assert reference.calls == 0
    for got, want in zip(datums, before, strict=True):
        assert got.model_input == want.model_input
        for key, tensor in _inputs(want).items():
            assert torch.equal(_inputs(got)[key], tensor), key


def test_penalty_is_minus_coef_times_the_logprob_gap_less_its_batch_mean() -> None:
    datums, reference = _case()
    before = [_inputs(d) for d in datums]
    coef = 0.3
    metrics = asyncio.run(apply_kl_penalty(datums, reference, coef))
    assert reference.calls == len(datums)
    gaps, masks = [], []
    for datum, old in zip(datums, before, strict=True):
        full = (*datum.model_input.to_ints(), int(old["target_tokens"][-1]))
        ref = torch.tensor(reference.logprobs[full])
        gaps.append((old["logprobs"] - ref) * old["mask"])  # logp_policy - logp_ref, sampled tokens
        masks.append(old["mask"])
    mean_gap = float(sum(g.sum() for g in gaps) / sum(m.sum() for m in masks))
    assert metrics == {METRIC_KL: pytest.approx(mean_gap)}
    for datum, old, gap, mask in zip(datums, before, gaps, masks, strict=True):
        change = _inputs(datum)["advantages"] - old["advantages"]
        assert torch.allclose(change, coef * mask * (mean_gap - gap), atol=1e-6)
        assert torch.all(change[mask == 0] == 0)  # observed tokens keep their advantage
        # the token-level part: -coef * (logp_policy - logp_ref), up to the batch-wide constant
        assert torch.allclose((change - coef * mean_gap)[mask > 0], -coef * gap[mask > 0], atol=1e-6)
        for key in ("logprobs", "target_tokens", "mask"):
            assert torch.equal(_inputs(datum)[key], old[key]), key


def test_negative_coef_is_refused() -> None:
    with pytest.raises(ValueError, match="kl_penalty_coef must be >= 0"):
        ToyConfig(kl_penalty_coef=-0.1)


def _run(log: Path, steps: int, **kwargs: Any) -> list[dict[str, Any]]:
    config = ToyConfig(log_path=str(log), max_steps=steps, eval_every=0, progress=False, **kwargs)
    training.train(config)
    return read_rows(log / "metrics.jsonl")


def test_a_run_with_the_penalty_logs_its_kl_and_keeps_its_reference_on_resume(tmp_path: Path) -> None:
    rows = _run(tmp_path, 2, kl_penalty_coef=0.5, learning_rate=0.05)
    trained = [r for r in rows if r["datums"] > 0]
    assert trained and all(METRIC_KL in r for r in trained)
    assert all(METRIC_KL not in r for r in rows if r["datums"] == 0)
    if rows[0]["datums"] > 0:  # step 0 samples the reference's own weights
        assert abs(rows[0][METRIC_KL]) < 1e-3
    record = (tmp_path / KL_REFERENCE_FILE).read_text()
    assert json.loads(record)["sampler_path"].endswith("/sampler_weights/kl_reference")
    saved = next((tmp_path / "checkpoints").glob("*/sampler_weights/kl_reference"))
    stamp = saved.stat().st_mtime_ns

    rows = _run(tmp_path, 4, kl_penalty_coef=0.5, learning_rate=0.05)  # resumes at step 2
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    later = [r for r in rows[2:] if r["datums"] > 0]
    assert later and all(METRIC_KL in r for r in later)
    # the policy moved away from the reference (four steps at a high rate): the KL is not 0
    assert any(abs(r[METRIC_KL]) > 1e-4 for r in later)
    assert (tmp_path / KL_REFERENCE_FILE).read_text() == record  # loaded, not saved again
    assert saved.stat().st_mtime_ns == stamp


def test_a_run_without_the_penalty_has_no_reference(tmp_path: Path) -> None:
    rows = _run(tmp_path, 1)
    assert not (tmp_path / KL_REFERENCE_FILE).exists()
    assert all(METRIC_KL not in r for r in rows)
