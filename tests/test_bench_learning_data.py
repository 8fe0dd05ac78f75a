"""The learning bench's warm-start data: scripted transcripts become one datum per game."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

import training
from envs.twenty_questions.train import TwentyQuestionsTrainConfig

BENCH = Path(__file__).resolve().parents[1] / "bench" / "twenty_questions_learning.py"


def _bench_module():
    spec = importlib.util.spec_from_file_location("twenty_questions_learning", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("player", ["halving", "kb-optimal"])
def test_scripted_datums_are_whole_games_with_weights_on_the_player_only(player: str):
    bench = _bench_module()
    config = training.parse_config(
        TwentyQuestionsTrainConfig, [f"{k}={v}" for k, v in bench.BENCH_DEFAULTS.items()]
    )
    datums, win_rate = asyncio.run(bench.scripted_datums(config, 12, seed=7, player_name=player))
    assert len(datums) == 12  # the renderer extends: one sequence per game
    assert win_rate == 1.0 if player == "halving" else win_rate > 0.5
    for datum in datums:
        weights = datum.loss_fn_inputs["weights"].to_torch()
        targets = datum.loss_fn_inputs["target_tokens"].to_torch()
        assert len(weights) == len(targets) == datum.model_input.length
        trained = targets[weights > 0].tolist()
        assert 0 < len(trained) < len(targets)
        assert trained.count(2) >= 1  # each player turn ends with <|im_end|>
        # no player turn is longer than the per-turn budget (16 tokens) the RL runs sample
        runs, current = [], 0
        for w in weights.tolist():
            if w > 0:
                current += 1
            elif current:
                runs.append(current)
                current = 0
        runs.append(current)
        assert max(runs) <= config.max_tokens
