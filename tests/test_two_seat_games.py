"""The included two-seat games (tic-tac-toe, Nim) through their train CLI config: one warm-start
step and one self-play RL step on the tiny model write the win/draw/loss table per opponent."""

from __future__ import annotations

from pathlib import Path

import pytest

import training
from envs.nim.train import NimTrainConfig
from envs.seats import TwoSeatTrainConfig
from envs.tictactoe.train import TicTacToeTrainConfig
from training._logging import read_rows

GAMES = {
    "tictactoe": (TicTacToeTrainConfig, ("win", "draw", "loss")),
    "nim": (NimTrainConfig, ("win", "loss")),
}
"""Each game's train config and the results its table has (Nim has no draws)."""


@pytest.mark.parametrize("game", sorted(GAMES))
def test_one_step_on_the_tiny_model_writes_the_table_per_opponent(game: str, tmp_path: Path) -> None:
    config_class, results = GAMES[game]
    config: TwoSeatTrainConfig = training.parse_config(
        config_class,
        [
            "model_name=turngym/tiny-random-llama",
            f"log_path={tmp_path}",
            "max_steps=1",
            "eval_every=1",
            "batch_size=1",
            "group_size=2",
            "train_opponents=self",
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
    for row in evals:
        for opponent in ("random", "optimal"):
            table = {k: row[f"eval/env/vs_{opponent}/{game}/{k}"] for k in results}
            assert sum(table.values()) == pytest.approx(1.0)
            assert row[f"eval/score_vs_{opponent}"] == pytest.approx(
                table["win"] + 0.5 * table.get("draw", 0.0)
            )
        assert row["eval/rollout/rollouts/requested"] == 4.0  # 2 games per opponent, the policy's seat
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert rows[0]["rollout/rollouts/requested"] == 4.0  # 2 self-play games x 2 training seats
