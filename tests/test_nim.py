"""Nim (envs.nim): rules, the optimal player, held-out tables, the train CLI, a person's seat."""

from __future__ import annotations

import io
import itertools
import random
from functools import partial

import anyio
import pytest

import training
from backend.model import SMOLLM2
from envs.nim.builders import NimDatasetBuilder, eval_builders, make_opponent, opponents
from envs.nim.config import NimConfig
from envs.nim.env import Metric, NimGame, best_takes, legal_takes, parse_move, parse_pile, position_message
from envs.nim.players import OptimalPlayer
from envs.nim.train import NimTrainConfig
from envs.play_seat import play
from envs.seats import STOP_SEAT_FAULT, SeatedGroupBuilder
from renderers_ext import load_renderer

R = load_renderer("qwen3_instruct", SMOLLM2)
WIN, LOSS, ILLEGAL = str(Metric.WIN), str(Metric.LOSS), str(Metric.ILLEGAL)


def test_messages_parse_and_moves_are_checked() -> None:
    assert parse_pile("Opponent took 2. " + position_message(7, 3)) == 7
    assert position_message(2, 3, 1) == "Opponent took 1. Stones left: 2. Take 1 to 2."
    assert parse_move("I take 3, then 1") == 3 and parse_move("none") is None
    assert legal_takes(2, 3) == [1, 2] and best_takes(7, 3) == [3] and best_takes(8, 3) == []
    with pytest.raises(ValueError, match="pile_min <= pile_max"):
        NimConfig(pile_min=9, pile_max=5)


def test_the_last_stone_wins_and_an_illegal_take_forfeits() -> None:
    async def go() -> tuple[object, object]:
        game = NimGame(NimConfig(illegal_reward=-2.0), pile=3)
        last = await game.on_move(0, {"role": "assistant", "content": "3"})
        other = NimGame(NimConfig(illegal_reward=-2.0), pile=2)
        await other.on_move(0, {"role": "assistant", "content": "1"})
        return last, await other.on_move(1, {"role": "assistant", "content": "2"})

    last, illegal = anyio.run(go)
    assert last.done and last.rewards == {0: 1.0, 1: -1.0}  # type: ignore[attr-defined]
    assert last.metrics[0][WIN] == 1.0 and last.metrics[1][LOSS] == 1.0  # type: ignore[attr-defined]
    assert illegal.done and illegal.stop_reason == STOP_SEAT_FAULT  # type: ignore[attr-defined]
    assert illegal.rewards == {1: -2.0, 0: 0.0} and illegal.metrics[1][ILLEGAL] == 1.0  # type: ignore[attr-defined]


def _play(seats, games: int, seed: int = 0):
    b = SeatedGroupBuilder(
        make_game=partial(NimGame.drawn, NimConfig()), renderer=R, seats=seats, games=games, seed=seed
    )
    return anyio.run(b.play, None)


def test_optimal_wins_every_winning_pile_and_beats_random_mostly() -> None:
    them = opponents()
    for seats, mine in (
        ((them.seat("optimal"), them.seat("random")), 0),
        ((them.seat("random"), them.seat("optimal")), 1),
    ):
        records = _play(seats, 40)
        assert all(r.ok for r in records)
        assert sum(r.seats[mine].metrics[WIN] for r in records) >= 30


def test_every_seats_observation_extends_its_last_one() -> None:
    them = opponents()
    for record in _play((them.seat("random"), them.seat("optimal")), 8, seed=2):
        for seat in record.seats:
            steps = seat.trajectory.transitions
            assert steps
            for before, after in itertools.pairwise(steps):
                prefix = before.ob.to_ints() + list(before.ac.tokens)
                assert after.ob.to_ints()[: len(prefix)] == prefix


def test_optimal_against_optimal_the_pile_decides() -> None:
    async def one(pile: int) -> float:
        game = NimGame(NimConfig(), pile=pile)
        players = [OptimalPlayer(1), OptimalPlayer(2)]
        seat = 0
        while True:
            said = await players[seat]([{"role": "user", "content": position_message(game.pile, 3)}])
            move = await game.on_move(seat, said)
            if move.done:
                return move.metrics[0][WIN]
            seat = 1 - seat

    for pile in range(1, 13):
        assert anyio.run(one, pile) == (1.0 if pile % 4 else 0.0)


def test_held_out_games_are_tagged_per_opponent_and_seeded_per_game() -> None:
    builders = eval_builders(R, NimConfig(), ("random", "optimal"), games=4, seed=3)
    assert [b.tags for b in builders] == [("nim", "vs_random")] * 2 + [("nim", "vs_optimal")] * 2
    a = [make_opponent("random", random.Random(1)).rng.random() for _ in range(2)]  # type: ignore[attr-defined]
    assert a[0] == a[1]
    with pytest.raises(ValueError, match="unknown nim opponent"):
        NimDatasetBuilder(train_opponents="self,minimax")
    with pytest.raises(ValueError, match="not self"):
        NimDatasetBuilder(eval_opponents="self")


def test_eval_figures_are_the_win_rates_per_opponent() -> None:
    config = training.parse_config(NimTrainConfig, [])
    figures = config.eval_figures(
        {"env/vs_random/nim/win": 0.75, "env/vs_optimal/nim/win": 0.25, "env/all/nim/illegal": 0.125}
    )
    assert figures == {"score_vs_random": 0.75, "score_vs_optimal": 0.25, "illegal_rate": 0.125}


def test_a_person_takes_the_second_seat_against_the_optimal_player() -> None:
    out = io.StringIO()
    records = anyio.run(
        lambda: play(
            "nim",
            seat=1,
            opponent="optimal",
            games=1,
            seed=0,
            model="turngym/tiny-random-llama",
            root=None,
            temperature=0.0,
            stdin=io.StringIO("1\n" * 12),
            stdout=out,
        )
    )
    record = records[0]
    assert record.ok and record.seats[1].player == "you"
    text = out.getvalue()
    assert "Let's play Nim" in text and "Stones left:" in text
    assert text.rstrip().splitlines()[-1].startswith("game over: ")
