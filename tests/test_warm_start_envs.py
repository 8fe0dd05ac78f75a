"""Env dataset builders that script warm-start episodes (``training.SupportsScriptedEpisodes``),
played through the engine by ``training.scripted_datums``; and :class:`envs.PlayerPolicy`."""

from __future__ import annotations

import anyio
import pytest
import tinker

import training
from envs import PlayerPolicy
from envs.twenty_questions.train import TwentyQuestionsTrainConfig
from training._rollouts import rollout_config


def _weight_runs(weights: list[float]) -> list[int]:
    """Lengths of the runs of trained (weight > 0) tokens: one per player turn."""
    runs, current = [], 0
    for w in weights:
        if w > 0:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    return [*runs, current] if current else runs


def test_twenty_questions_scripts_halving_games_as_one_sequence_each() -> None:
    config = training.parse_config(
        TwentyQuestionsTrainConfig,
        ["env.candidates=8", "env.max_questions=4", "env.question_reward=0", "scripted_split_noise=0"],
    )
    builder = config.dataset_builder()
    assert isinstance(builder, training.SupportsScriptedEpisodes)
    episodes = anyio.run(builder.scripted_episodes, 12, 7)
    assert len(episodes) == 12 and all(isinstance(p, PlayerPolicy) and p.env is e for e, p in episodes)
    datums, metrics = anyio.run(training.scripted_datums, episodes, rollout_config(config.max_tokens))
    assert metrics["warm_start/episodes"] == 12 and len(datums) == 12  # one sequence per game
    assert metrics["warm_start/scripted_reward"] == 1.0  # the halving player wins every game
    for datum in datums:
        weights = datum.loss_fn_inputs["weights"].to_torch()
        targets = datum.loss_fn_inputs["target_tokens"].to_torch()
        assert len(weights) == len(targets) == datum.model_input.length
        trained = targets[weights > 0].tolist()
        assert 0 < len(trained) < len(targets)  # the player's tokens only, not the prompt or answers
        runs = _weight_runs(weights.tolist())
        assert trained.count(2) == len(runs) >= 2  # each player turn ends with <|im_end|>; asks, then guesses
        assert max(runs) <= config.max_tokens  # no scripted turn is longer than the RL runs sample


def test_noisy_scripted_player_splits_at_random_and_wins_less() -> None:
    """``scripted_split_noise=1``: every question names a random number of the words left, so
    the scripted games (the warm start's data) win less often than halving."""
    exact, noisy = (
        training.parse_config(
            TwentyQuestionsTrainConfig,
            ["env.candidates=8", "env.max_questions=4", "env.question_reward=0", f"scripted_split_noise={noise}"],
        ).dataset_builder()
        for noise in (0.0, 1.0)
    )

    async def play(builder):  # type: ignore[no-untyped-def]
        episodes = await builder.scripted_episodes(48, 3)
        _, metrics = await training.scripted_datums(episodes, rollout_config(16))
        return metrics["warm_start/scripted_reward"], [env.messages for env, _ in episodes]

    exact_reward, _ = anyio.run(play, exact)
    noisy_reward, conversations = anyio.run(play, noisy)
    assert exact_reward == 1.0 and 0.4 < noisy_reward < 0.95
    first_questions = {c[1]["content"].count(",") for c in conversations if c[1]["content"].startswith("Is it")}
    assert len(first_questions) >= 3  # split sizes vary (halving always names 4 of 8: 2 commas)
    again, _ = anyio.run(play, noisy)
    assert again == noisy_reward  # the draws depend on the seed only


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
