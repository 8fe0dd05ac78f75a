"""Datum assembly: trajectory groups -> ``tinker.Datum`` s with advantages.

- Default (:class:`AdvantageConfig` ()): exactly the cookbook's pipeline
  (``compute_advantages`` + ``trajectory_to_data``); the datums are the cookbook's own.
- ``normalize_std``: group-centred advantages divided by the group std (+ eps).
- ``discount``: per-turn advantages ``G_t - mean_group(G_0)`` with discounted returns-to-go
  (one value per transition), built by :func:`trajectory_datums`, which merges turns exactly like
  ``trajectory_to_data`` (a new datum only where an observation stops extending the sequence).

In every case the loss mask is 1 on sampled tokens only (0 on observation tokens and on
transitions flagged ``parse_error_masked``) and ``logprobs`` are the sampler's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import tinker
import torch
from tinker import TensorData
from tinker_cookbook.rl.data_processing import compute_advantages, trajectory_to_data
from tinker_cookbook.rl.types import PARSE_ERROR_MASKED_METRIC_KEY, Trajectory, TrajectoryGroup
from tinker_cookbook.supervised.common import create_rightshifted_model_input_and_leftshifted_targets

from rollout._config import AdvantageConfig
from rollout._extension import FlatOb, flat_tokens


@dataclass(frozen=True)
class Assembled:
    """Datums for the trainer, where each came from, and assembly metrics."""

    datums: list[tinker.Datum]
    """Training datums (``target_tokens``, ``logprobs``, ``advantages``, ``mask``)."""
    metadata: list[dict[str, int]] = field(default_factory=list)
    """Per datum: ``group_idx`` and ``traj_idx`` (indices into the groups passed in)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """``datums/count``, ``datums/per_traj``, ``datums/tokens``, ``datums/action_tokens``,
    ``advantage/mean``, ``advantage/abs_mean``."""


def _check_logprobs(groups: Sequence[TrajectoryGroup]) -> None:
    for g, group in enumerate(groups):
        for i, traj in enumerate(group.trajectories_G):
            for t, tr in enumerate(traj.transitions):
                lp = tr.ac.maybe_logprobs
                if lp is None:
                    raise ValueError(
                        f"group {g} trajectory {i} turn {t}: no sampler logprobs; "
                        "datums need the completer to return logprobs"
                    )
                if lp is not None and len(lp) != len(tr.ac.tokens):
                    raise ValueError(
                        f"group {g} trajectory {i} turn {t}: {len(tr.ac.tokens)} tokens but {len(lp)} logprobs"
                    )


def is_constant_group(group: TrajectoryGroup) -> bool:
    """Whether every trajectory of ``group`` got the same total reward (within ``1e-9``).

    Such a group has zero group-centred advantage everywhere: no gradient signal. The one
    constant-reward test of TurnGym (the training loop's ``remove_constant_reward_groups``, which
    filters groups with :func:`informative_groups` before :func:`assemble`, and
    ``lr_scale_by_signal``). Unlike the cookbook's
    ``remove_constant_reward_groups``, :func:`informative_groups` returns an empty list when no
    group is informative (the caller skips the update instead of training on one constant group).
    """
    totals = group.get_total_rewards()
    return all(math.isclose(x, totals[0], abs_tol=1e-9) for x in totals)


def informative_groups(groups: Sequence[TrajectoryGroup]) -> list[TrajectoryGroup]:
    """The groups of ``groups`` that are not :func:`is_constant_group` (order kept)."""
    return [g for g in groups if not is_constant_group(g)]


def trajectory_returns(traj: Trajectory, final_reward: float, discount: float) -> list[float]:
    """Discounted return-to-go of every transition (the group reward added to the last one)."""
    rewards = [tr.reward for tr in traj.transitions]
    if rewards:
        rewards[-1] += final_reward
    out = [0.0] * len(rewards)
    acc = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        acc = rewards[t] + discount * acc
        out[t] = acc
    return out


def group_advantages(group: TrajectoryGroup, config: AdvantageConfig) -> list[list[float]]:
    """Advantage of every transition of every trajectory of ``group`` (see :class:`AdvantageConfig`)."""
    if config.discount is None:
        totals = torch.tensor(group.get_total_rewards())
        centred = totals - totals.mean()
        if config.normalize_std:
            centred = centred / (totals.std(unbiased=False) + config.eps)
        return [[float(a)] * len(t.transitions) for a, t in zip(centred, group.trajectories_G, strict=True)]
    returns = [
        trajectory_returns(t, r, config.discount)
        for t, r in zip(group.trajectories_G, group.final_rewards_G, strict=True)
    ]
    starts = torch.tensor([r[0] if r else 0.0 for r in returns])
    mean = float(starts.mean())
    scale = float(starts.std(unbiased=False)) + config.eps if config.normalize_std else 1.0
    return [[(g - mean) / scale for g in r] for r in returns]


def _flat_to_model_input(flat: FlatOb) -> tinker.ModelInput:
    chunks: list[tinker.ModelInputChunk] = []
    text: list[int] = []
    for x in flat:
        if isinstance(x, int):
            text.append(x)
        else:
            if text:
                chunks.append(tinker.EncodedTextChunk(tokens=text))
                text = []
            chunks.append(x)
    if text:
        chunks.append(tinker.EncodedTextChunk(tokens=text))
    return tinker.ModelInput(chunks=chunks)


def _datum(seq: FlatOb, logprobs: list[float], advantages: list[float], mask: list[float]) -> tinker.Datum:
    model_input = _flat_to_model_input(seq)
    inputs, targets = create_rightshifted_model_input_and_leftshifted_targets(list(model_input.chunks))
    return tinker.Datum(
        model_input=inputs,
        loss_fn_inputs={
            "target_tokens": TensorData.from_torch(torch.tensor(targets)),
            "logprobs": TensorData.from_torch(torch.tensor(logprobs[1:])),
            "advantages": TensorData.from_torch(torch.tensor(advantages[1:])),
            "mask": TensorData.from_torch(torch.tensor(mask[1:])),
        },
    )


def trajectory_datums(traj: Trajectory, advantages: Sequence[float]) -> list[tinker.Datum]:
    """Like the cookbook's ``trajectory_to_data`` but with one advantage per transition.

    With equal advantages it returns the same datums as ``trajectory_to_data`` (tested).
    """
    if len(advantages) != len(traj.transitions):
        raise ValueError(f"{len(advantages)} advantages for {len(traj.transitions)} transitions")
    data: list[tinker.Datum] = []
    seq: FlatOb = []
    logprobs: list[float] = []
    advs: list[float] = []
    mask: list[float] = []
    for tr, adv in zip(traj.transitions, advantages, strict=True):
        ob = flat_tokens(tr.ob)
        n = len(seq)
        if n == 0:
            delta = ob
        elif len(ob) >= n and ob[:n] == seq:
            delta = ob[n:]
        else:
            data.append(_datum(seq, logprobs, advs, mask))
            seq, logprobs, advs, mask = [], [], [], []
            delta = ob
        n_delta = sum(1 if isinstance(x, int) else x.length for x in delta)
        masked = float(tr.metrics.get(PARSE_ERROR_MASKED_METRIC_KEY, 0.0)) >= 1.0
        n_ac = len(tr.ac.tokens)
        seq.extend(delta)
        seq.extend(tr.ac.tokens)
        logprobs.extend([0.0] * n_delta + (tr.ac.logprobs if n_ac else []))
        advs.extend([0.0] * n_delta + [0.0 if masked else adv] * n_ac)
        mask.extend([0.0] * n_delta + [0.0 if masked else 1.0] * n_ac)
    if seq:
        data.append(_datum(seq, logprobs, advs, mask))
    return data


def assemble(groups: Sequence[TrajectoryGroup], config: AdvantageConfig | None = None) -> Assembled:
    """Turn kept groups into datums (see the module docstring); bad input raises ``ValueError``.

    CPU-bound (tensor building): inside a running event loop with large batches, call it as
    ``await anyio.to_thread.run_sync(assemble, groups, config)`` to keep the loop responsive.
    """
    config = config or AdvantageConfig()
    groups = list(groups)
    _check_logprobs(groups)
    default = config.discount is None and not config.normalize_std
    datums: list[tinker.Datum] = []
    metadata: list[dict[str, int]] = []
    n_traj = 0
    adv_sum = 0.0
    adv_abs = 0.0
    action_tokens = 0
    cookbook_adv = compute_advantages(groups) if default else None
    for g, group in enumerate(groups):
        per_turn = None if cookbook_adv is not None else group_advantages(group, config)
        for i, traj in enumerate(group.trajectories_G):
            n_traj += 1
            if cookbook_adv is not None:
                adv = float(cookbook_adv[g][i])
                new = trajectory_to_data(traj, adv)
                turn_advs = [adv] * len(traj.transitions)
            else:
                assert per_turn is not None
                turn_advs = per_turn[i]
                new = trajectory_datums(traj, turn_advs)
            for tr, a in zip(traj.transitions, turn_advs, strict=True):
                if float(tr.metrics.get(PARSE_ERROR_MASKED_METRIC_KEY, 0.0)) < 1.0:
                    k = len(tr.ac.tokens)
                    action_tokens += k
                    adv_sum += a * k
                    adv_abs += abs(a) * k
            datums.extend(new)
            metadata.extend({"group_idx": g, "traj_idx": i} for _ in new)
    metrics = {
        "datums/count": float(len(datums)),
        "datums/per_traj": len(datums) / n_traj if n_traj else 0.0,
        "datums/tokens": float(sum(d.model_input.length for d in datums)),
        "datums/action_tokens": float(action_tokens),
        "advantage/mean": adv_sum / action_tokens if action_tokens else 0.0,
        "advantage/abs_mean": adv_abs / action_tokens if action_tokens else 0.0,
    }
    return Assembled(datums=datums, metadata=metadata, metrics=metrics)
