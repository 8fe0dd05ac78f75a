"""Env dataset builders that script warm-start episodes (``training.SupportsScriptedEpisodes``),
played through the engine by ``training.scripted_datums``; and :class:`envs.PlayerPolicy`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import anyio
import pytest
import tinker

import training
from envs import PlayerPolicy
from envs.twenty_questions.train import TwentyQuestionsTrainConfig
from training._rollouts import rollout_config

BENCH = Path(__file__).resolve().parents[1] / "bench" / "twenty_questions_learning.py"


def test_twenty_questions_scripts_halving_games_identical_to_the_learning_bench() -> None:
    config = training.parse_config(
        TwentyQuestionsTrainConfig, ["env.candidates=8", "env.max_questions=4", "env.question_reward=0"]
    )
    builder = config.dataset_builder()
    assert isinstance(builder, training.SupportsScriptedEpisodes)
    episodes = anyio.run(builder.scripted_episodes, 12, 7)
    assert len(episodes) == 12 and all(isinstance(p, PlayerPolicy) and p.env is e for e, p in episodes)
    datums, metrics = anyio.run(training.scripted_datums, episodes, rollout_config(config.max_tokens))
    assert metrics["warm_start/episodes"] == 12 and len(datums) == 12  # one sequence per game
    assert metrics["warm_start/scripted_reward"] == 1.0  # the halving player wins every game
    # the same tokens and weights as the learning bench's hand-made transcripts
    spec = importlib.util.spec_from_file_location("twenty_questions_learning", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    expected, win_rate = anyio.run(bench.scripted_datums, config, 12, 7)
    assert win_rate == 1.0
    for got, want in zip(datums, expected, strict=True):
        assert got.model_input.to_ints() == want.model_input.to_ints()
        for key in ("target_tokens", "weights"):
            assert got.loss_fn_inputs[key].to_torch().tolist() == want.loss_fn_inputs[key].to_torch().tolist()


def test_player_policy_refuses_a_non_assistant_reply() -> None:
    config = training.parse_config(TwentyQuestionsTrainConfig, [])
    (env, _), *_ = anyio.run(config.dataset_builder().scripted_episodes, 1, 0)

    async def user_player(messages):  # type: ignore[no-untyped-def]
        return {"role": "user", "content": "hi"}

    async def main():
        await env.initial_observation()
        with pytest.raises(ValueError, match="assistant message"):
            await PlayerPolicy(env, user_player)(tinker.ModelInput.empty(), [])

    anyio.run(main)
