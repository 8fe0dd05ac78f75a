"""Datum assembly (equal to the cookbook's on the same trajectories; std normalisation; per-turn
discounting; masks and logprobs) and trajectory logs (JSONL, escaped HTML)."""

from __future__ import annotations

import json
import math

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tinker_cookbook.completers import TokensWithLogprobs
from tinker_cookbook.rl.data_processing import assemble_training_data, compute_advantages, trajectory_to_data
from tinker_cookbook.rl.types import PARSE_ERROR_MASKED_METRIC_KEY, TrajectoryGroup

from completers import ScriptedTokenCompleter
from rollout import (
    AdvantageConfig,
    EngineConfig,
    RolloutEngine,
    RolloutLimits,
    Strategy,
    assemble,
    write_html,
    write_jsonl,
)
from rollout._datums import trajectory_datums
from rollout._logs import render_html, trajectory_records
from rollout.testing import SyntheticEnv, SyntheticGroup


def key(d):
    """Everything a datum carries, comparable."""
    return (
        d.model_input.to_ints(),
        {k: (v.dtype, v.to_torch().tolist()) for k, v in sorted(d.loss_fn_inputs.items())},
    )


def make_batch(env_specs, config=None, scripts=((7, 8, 2), (11, 2), (5, 6, 7, 2))):
    """One group per entry of ``env_specs`` (a list of SyntheticEnv kwargs per slot)."""
    builders = [
        SyntheticGroup(lambda i, specs=specs: SyntheticEnv(**specs[i]), size=len(specs))
        for specs in env_specs
    ]
    engine = RolloutEngine(ScriptedTokenCompleter(scripts, cycle=True, logprob=-0.5), config)
    return anyio.run(engine.run_batch, builders)


MIXED = [
    [
        {"turns": 4, "reward": 1.0},
        {"turns": 5, "reward": lambda t: float(t % 2), "break_at": 2},
        {"turns": 3, "reward": 0.0, "break_at": 1},
    ],
    [{"turns": 6, "reward": lambda t: 0.5 * t, "break_at": 3}, {"turns": 2, "reward": 2.0}],
]


def test_default_assembly_equals_the_cookbook_pipeline():
    result = make_batch(MIXED, EngineConfig(limits=RolloutLimits(max_turns=5)))
    groups = result.groups
    assembled = assemble(groups)
    cookbook, meta = assemble_training_data(groups, compute_advantages(groups))
    assert [key(d) for d in assembled.datums] == [key(d) for d in cookbook]
    assert assembled.metadata == meta
    assert assembled.metrics["datums/count"] == len(cookbook) > len(result.outcomes)


def test_engine_predicts_the_datums_the_cookbook_makes():
    result = make_batch(MIXED)
    for o in result.outcomes:
        assert o.group is not None
        for traj, stats in zip(o.group.trajectories_G, o.stats, strict=True):
            data = trajectory_to_data(traj, 1.0)
            assert stats.datums == len(data) == len(stats.breaks) + 1
            assert stats.tokens_trained == sum(d.model_input.length + 1 for d in data)
            assert stats.tokens_unique <= stats.tokens_trained <= stats.tokens_per_turn


@given(
    specs=st.lists(
        st.fixed_dictionaries(
            {
                "turns": st.integers(1, 6),
                "break_at": st.none() | st.integers(1, 6),
                "reward": st.floats(-2, 2, allow_nan=False),
            }
        ),
        min_size=1,
        max_size=4,
    ),
    limits=st.sampled_from(
        [
            RolloutLimits(),
            RolloutLimits(max_turns=3),
            RolloutLimits(max_sampled_tokens=9),
            RolloutLimits(max_trajectory_tokens=20),
        ]
    ),
)
def test_stats_and_per_turn_builder_match_the_cookbook(specs, limits):
    result = make_batch([specs], EngineConfig(limits=limits))
    (o,) = result.outcomes
    assert o.group is not None
    for traj, stats in zip(o.group.trajectories_G, o.stats, strict=True):
        data = trajectory_to_data(traj, 0.25)
        assert stats.datums == len(data)
        assert stats.tokens_trained == sum(d.model_input.length + 1 for d in data)
        ours = trajectory_datums(traj, [0.25] * len(traj.transitions))
        assert [key(d) for d in ours] == [key(d) for d in data]


def test_masks_cover_sampled_tokens_only_and_logprobs_are_the_samplers():
    # actions are (7, 8, 2); observations only use 1, 3, 4, 5 (prompt) and 9, 10 (feedback)
    result = make_batch([[{"turns": 3, "break_at": 2}, {"turns": 2}]], scripts=((7, 8, 2),))
    assembled = assemble(result.groups)
    assert len(assembled.datums) == 3
    total = 0.0
    for d in assembled.datums:
        mask = d.loss_fn_inputs["mask"].to_torch().tolist()
        logprobs = d.loss_fn_inputs["logprobs"].to_torch().tolist()
        targets = d.loss_fn_inputs["target_tokens"].to_torch().tolist()
        assert all(tok in (7, 8, 2) for tok, m in zip(targets, mask, strict=True) if m)
        assert all(m in (0.0, 1.0) for m in mask)
        assert logprobs == [-0.5 if m else 0.0 for m in mask]
        total += sum(mask)
    # every sampled token is trained exactly once (earlier actions re-appear as context after a break)
    assert total == result.metrics["traj/sampled_tokens"] == 3 * (3 + 2)
    assert assembled.metrics["datums/action_tokens"] == sum(
        sum(d.loss_fn_inputs["mask"].to_torch().tolist()) for d in assembled.datums
    )


def test_parse_error_masked_turns_get_no_signal():
    result = make_batch([[{"turns": 3}, {"turns": 3, "reward": 0.0}]], scripts=((7, 8, 2),))
    group = result.groups[0]
    group.trajectories_G[0].transitions[1].metrics[PARSE_ERROR_MASKED_METRIC_KEY] = 1.0
    ours = assemble([group], AdvantageConfig(discount=1.0))
    cookbook = assemble([group])
    for assembled in (ours, cookbook):
        mask = assembled.datums[0].loss_fn_inputs["mask"].to_torch().tolist()
        advs = assembled.datums[0].loss_fn_inputs["advantages"].to_torch().tolist()
        assert sum(mask) == 3 + 3  # turns 0 and 2 of trajectory 0; turn 1 is masked
        assert all(a == 0.0 for a, m in zip(advs, mask, strict=True) if not m)
        assert any(a != 0.0 for a in advs)


def test_std_normalisation():
    result = make_batch([[{"turns": 1, "reward": r} for r in (0.0, 1.0, 3.0)]])
    assembled = assemble(result.groups, AdvantageConfig(normalize_std=True))
    rewards = [0.0, 1.0, 3.0]
    mean = sum(rewards) / 3
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 3)
    for d, r in zip(assembled.datums, rewards, strict=True):
        advs = [
            a
            for a, m in zip(
                d.loss_fn_inputs["advantages"].to_torch().tolist(),
                d.loss_fn_inputs["mask"].to_torch().tolist(),
                strict=True,
            )
            if m
        ]
        assert advs and all(a == pytest.approx((r - mean) / (std + 1e-6), rel=1e-5) for a in advs)


def test_per_turn_discounting():
    # trajectory A: step rewards 1, 0, 2 plus group reward 1 -> r = [1, 0, 3]
    # discount 0.5: G = [1 + 0.5 * 1.5, 0 + 0.5 * 3, 3] = [1.75, 1.5, 3]; trajectory B: G = [0.0]
    result = make_batch(
        [[{"turns": 3, "reward": lambda t: [1.0, 0.0, 2.0][t - 1]}, {"turns": 1, "reward": 0.0}]],
    )
    group = result.groups[0]
    group = TrajectoryGroup(group.trajectories_G, [1.0, 0.0], group.metrics_G)
    assembled = assemble([group], AdvantageConfig(discount=0.5))
    baseline = (1.75 + 0.0) / 2
    datum_a = assembled.datums[0]
    advs = datum_a.loss_fn_inputs["advantages"].to_torch().tolist()
    mask = datum_a.loss_fn_inputs["mask"].to_torch().tolist()
    per_turn = []
    for a, m in zip(advs, mask, strict=True):
        if m and (not per_turn or per_turn[-1] != a):
            per_turn.append(a)
    assert per_turn == pytest.approx([1.75 - baseline, 1.5 - baseline, 3.0 - baseline])


def test_missing_logprobs_is_a_clear_error():
    result = make_batch([[{"turns": 2}]])
    group = result.groups[0]
    tr = group.trajectories_G[0].transitions[1]
    tr.ac = TokensWithLogprobs(tokens=tr.ac.tokens, maybe_logprobs=None)
    with pytest.raises(ValueError, match=r"group 0 trajectory 0 turn 1: no sampler logprobs") as info:
        assemble([group])
    assert "\n" not in str(info.value)


def test_constant_groups_are_filtered_before_assembly_by_the_one_filter():
    from rollout import informative_groups

    result = make_batch(
        [[{"turns": 2}, {"turns": 2}], [{"turns": 1, "reward": 0.0}, {"turns": 1, "reward": 1.0}]]
    )
    kept = informative_groups(result.groups)
    assert kept == [result.groups[1]]
    assembled = assemble(kept)
    assert {m["group_idx"] for m in assembled.metadata} == {0}  # indices into the groups passed in
    assert not hasattr(AdvantageConfig(), "drop_constant_groups")  # one name: remove_constant_reward_groups


# --- logs -----------------------------------------------------------------------------------------


def test_jsonl_has_a_record_per_trajectory_and_per_failed_group(tmp_path, tokenizer):
    script = [[*tokenizer.encode("<script>alert(1)</script> & more", add_special_tokens=False), 2]]
    specs = [[{"turns": 2, "break_at": 1}, {"turns": 2}], [{"turns": 2, "fail_at": 1}]]
    result = make_batch(specs, EngineConfig(strategy=Strategy.fail_fast()), scripts=script)
    path = tmp_path / "logs" / "rollouts.jsonl"
    assert write_jsonl(result, path, tokenizer, step=7) == 3
    records = [json.loads(line) for line in path.read_text().splitlines()]
    ok = [r for r in records if not r["failed"]]
    failed = [r for r in records if r["failed"]]
    assert len(ok) == 2 and len(failed) == 1
    assert failed[0]["failure"]["type"] == "ScriptedFailure" and failed[0]["step"] == 7
    first = ok[0]
    assert first["stop_reason"] == "completed" and first["reward_total"] == 2.0
    assert first["turns"][0]["action"].startswith("<script>alert(1)</script> & more")
    assert first["turns"][1]["rerendered"] is True and first["breaks"][0].startswith("UNEXPECTED")
    assert first["metrics"]["rollout/turns"] == 2.0
    assert trajectory_records(result.outcomes, tokenizer) == [{**r, "step": None} for r in records]


def test_html_transcript_escapes_everything(tmp_path, tokenizer):
    script = [[*tokenizer.encode("<script>alert(1)</script>", add_special_tokens=False), 2]]
    result = make_batch([[{"turns": 2}], [{"turns": 1}], [{"turns": 1}]], scripts=script)
    page = render_html(result, tokenizer, n_groups=2, seed=1)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<h2>Group") == 2
    path = write_html(result, tmp_path / "t.html", tokenizer, n_groups=5)
    assert path.read_text().count("<h2>Group") == 3


def _group(totals: list[float]) -> TrajectoryGroup:
    import tinker
    from tinker_cookbook.rl.types import Trajectory

    trajectories = [Trajectory(transitions=[], final_ob=tinker.ModelInput.empty()) for _ in totals]
    return TrajectoryGroup(trajectories_G=trajectories, final_rewards_G=totals, metrics_G=[{} for _ in totals])


def test_one_constant_reward_filter_tolerates_float_noise():
    """``is_constant_group`` is the one constant-reward test (assemble and the training loop use it):
    float noise in equal totals does not make a group informative."""
    from rollout import informative_groups, is_constant_group

    noisy, flat, mixed = _group([0.1 + 0.2, 0.3]), _group([1.0, 1.0, 1.0]), _group([0.0, 1.0])
    assert is_constant_group(noisy) and is_constant_group(flat) and not is_constant_group(mixed)
    assert informative_groups([noisy, mixed, flat]) == [mixed]
    assert informative_groups([noisy, flat]) == []  # unlike the cookbook's filter: nothing kept
