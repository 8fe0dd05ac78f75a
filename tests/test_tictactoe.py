"""Tic-tac-toe (envs.tictactoe): rules, minimax, scripted players, held-out tables, the train CLI."""

from __future__ import annotations

import random

import anyio
import pytest

import training
from backend.model import SMOLLM2
from envs.seats import STOP_SEAT_FAULT, Seat, SeatedGroupBuilder
from envs.tictactoe.builders import TicTacToeDatasetBuilder, eval_builders, make_opponent
from envs.tictactoe.config import TicTacToeConfig
from envs.tictactoe.env import (
    EMPTY,
    Metric,
    TicTacToeGame,
    free_cells,
    move_values,
    parse_board,
    parse_move,
    render_board,
    winner,
)
from envs.tictactoe.players import OptimalPlayer, RandomPlayer
from envs.tictactoe.train import TicTacToeTrainConfig
from renderers_ext import load_renderer

R = load_renderer("qwen3_instruct", SMOLLM2)


def test_board_text_round_trips_and_moves_parse() -> None:
    board = ("X", "", "O", "", "X", "", "", "", "O")
    assert parse_board("X played 5.\n" + render_board(board) + "\nFree cells: ...") == board
    assert parse_move("I play 7, then 3") == 7 and parse_move("nothing") is None
    assert winner(("X", "X", "X", *[""] * 6)) == "X" and winner(EMPTY) is None
    assert free_cells(board) == [2, 4, 6, 7, 8]


def test_minimax_values() -> None:
    assert max(v for _, v in move_values(EMPTY, "X")) == 0  # the game is a draw
    # X to move can win at once on 3
    board = ("X", "X", "", "O", "O", "", "", "", "")
    assert dict(move_values(board, "X"))[3] == 1


def _play(seats, games: int, seed: int = 0):
    b = SeatedGroupBuilder(
        make_game=lambda rng: TicTacToeGame(), renderer=R, seats=seats, games=games, seed=seed
    )
    return anyio.run(b.play, None)


def test_optimal_never_loses_and_beats_random_mostly() -> None:
    optimal = Seat.pinned("optimal", lambda rng: OptimalPlayer(rng.randrange(1000)))
    rand = Seat.pinned("random", lambda rng: RandomPlayer(rng.randrange(1000)))
    for seats, mine in (((optimal, rand), 0), ((rand, optimal), 1)):
        records = _play(seats, 20)
        assert all(r.ok and r.seats[mine].metrics[Metric.LOSS] == 0.0 for r in records)
        assert sum(r.seats[mine].metrics[Metric.WIN] for r in records) >= 10
    records = _play((optimal, optimal), 6)
    assert all(r.seats[0].metrics[Metric.DRAW] == 1.0 for r in records)


def test_illegal_moves_forfeit_with_the_configured_rewards() -> None:
    async def go():
        game = TicTacToeGame(TicTacToeConfig(illegal_reward=-2.0))
        await game.on_move(0, {"role": "assistant", "content": "5"})
        return await game.on_move(1, {"role": "assistant", "content": "5"})

    move = anyio.run(go)
    assert move.done and move.stop_reason == STOP_SEAT_FAULT
    assert move.rewards == {1: -2.0, 0: 0.0}
    assert move.metrics[1][Metric.ILLEGAL] == 1.0 and move.metrics[0][Metric.WIN] == 1.0


def test_held_out_games_are_tagged_per_opponent_and_seeded_per_game() -> None:
    builders = eval_builders(R, TicTacToeConfig(), ("random", "optimal"), games=4, seed=3)
    assert [b.tags for b in builders] == [("tictactoe", "vs_random")] * 2 + [("tictactoe", "vs_optimal")] * 2
    a = [make_opponent("random", random.Random(1)).rng.random() for _ in range(2)]  # type: ignore[attr-defined]
    assert a[0] == a[1]
    with pytest.raises(ValueError, match="unknown tictactoe opponent"):
        TicTacToeDatasetBuilder(train_opponents="self,minimax")


def test_eval_figures_are_the_scores_per_opponent() -> None:
    config = training.parse_config(TicTacToeTrainConfig, [])
    figures = config.eval_figures(
        {
            "env/vs_random/tictactoe/win": 0.5,
            "env/vs_random/tictactoe/draw": 0.25,
            "env/vs_optimal/tictactoe/win": 0.0,
            "env/vs_optimal/tictactoe/draw": 0.5,
            "env/all/tictactoe/illegal": 0.125,
        }
    )
    assert figures == {"score_vs_random": 0.625, "score_vs_optimal": 0.25, "illegal_rate": 0.125}
