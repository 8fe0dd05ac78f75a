"""Training on a TextArena game through the adapter (envs.interop.textarena_train): the bisecting
scripted player wins GuessTheNumber through the adapter, and one step on the tiny model writes the
three stages of held-out results."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import training
from envs.interop.textarena_train import TextArenaDatasetBuilder, TextArenaTrainConfig
from rollout import EngineConfig, run_episode
from training._logging import read_rows


def test_the_scripted_bisector_wins_through_the_adapter() -> None:
    async def run() -> list[float]:
        episodes = await TextArenaDatasetBuilder().scripted_episodes(6, seed=0)
        rewards = []
        for env, policy in episodes:
            trajectory, _ = await run_episode(policy, env, EngineConfig())
            rewards.append(sum(t.reward for t in trajectory.transitions))
        return rewards

    assert anyio.run(run) == [1.0] * 6  # 1..20 in at most 5 bisecting guesses (10 allowed)


def test_train_and_held_out_seeds_are_apart() -> None:
    train, test = anyio.run(TextArenaDatasetBuilder(batch_size=2, num_batches=3, eval_games=4))
    train_seeds = {b.seed for i in range(len(train)) for b in train.get_batch(i)}  # type: ignore[attr-defined]
    test_seeds = {b.seed for b in test.get_batch(0)}  # type: ignore[attr-defined]
    assert len(train_seeds) == 6 and test_seeds == {0, 1, 2, 3} and not train_seeds & test_seeds


def test_one_step_on_the_tiny_model_reports_the_three_stages(tmp_path: Path) -> None:
    config = training.parse_config(
        TextArenaTrainConfig,
        [
            "model_name=turngym/tiny-random-llama",
            f"log_path={tmp_path}",
            "max_steps=1",
            "eval_every=1",
            "batch_size=1",
            "group_size=2",
            "eval_games=2",
            "warm_start.episodes=2",
            "warm_start.steps=1",
            "warm_start.batch_size=2",
            "progress=False",
        ],
    )
    summary = training.train(config)
    assert summary.end_step == 1 and summary.warm_start
    evals = read_rows(tmp_path / "eval.jsonl")
    assert [(r["step"], r["stage"]) for r in evals] == [(0, "untrained"), (0, "warm_start"), (1, "rl")]
    assert all(r["eval/rollout/rollouts/requested"] == pytest.approx(2.0) for r in evals)
