"""The conformance checker on multi-seat builders: it checks one training seat at a time (the
policy's other seats held by the builder's stand-in, acting inside the hosted game), passes on
the included games (tic-tac-toe, Nim), and flags a planted multi-seat bug (a game that addresses a move's news to a seat
that does not exist) and a self-play group it cannot check alone."""

from __future__ import annotations

import random
from dataclasses import replace

import anyio
import pytest
from hypothesis import strategies as st
from tinker_cookbook.renderers import Message

from backend.model import SMOLLM2
from envs.checker import CheckConfig, CheckName, Outcome, check_conformance
from envs.nim.builders import NimDatasetBuilder
from envs.seats import Move, Seat, SeatedGroupBuilder, TwoSeatDatasetBuilder
from envs.tictactoe.builders import TicTacToeDatasetBuilder, opponent_seat
from envs.tictactoe.env import TicTacToeGame
from renderers_ext import load_renderer

R = load_renderer("qwen3_instruct", SMOLLM2)


class MisaddressedGame(TicTacToeGame):
    """The planted bug: a move's news goes to seat ``mover + 1``, not to the other seat (right for
    X's moves by accident; O's news goes to a seat 2 that does not exist, and the game fails)."""

    async def on_move(self, seat: int, message: Message) -> Move:
        move = await super().on_move(seat, message)
        news = [m for ms in move.messages.values() for m in ms]
        return replace(move, messages={seat + 1: news} if news else {})


def _misaddressed(rng: random.Random) -> TicTacToeGame:
    return MisaddressedGame()


def _real(rng: random.Random) -> TicTacToeGame:
    return TicTacToeGame()


def _self_play(make_game, stand_in: Seat | None) -> SeatedGroupBuilder:  # picklable: module-level games
    return SeatedGroupBuilder(
        make_game=make_game, renderer=R, seats=(Seat.policy(), Seat.policy()), games=2, stand_in=stand_in
    )


@pytest.mark.parametrize("game", [TicTacToeDatasetBuilder, NimDatasetBuilder])
def test_the_checker_passes_on_the_included_games_training_groups(game: type[TwoSeatDatasetBuilder]) -> None:
    train, _ = anyio.run(game(batch_size=1, group_size=2, num_batches=1))
    # Nim: the checker's own clean replies ("Is it alive?", "The answer is 42.") are never a legal
    # take of 1 to 3 and end every game at once; the messages worth drawing are the takes
    moves: list[Message] = [{"role": "assistant", "content": str(n)} for n in (1, 2, 3)]
    takes = st.sampled_from(moves)
    config = CheckConfig(examples=6, action_messages=takes if game is NimDatasetBuilder else None)
    report = check_conformance(train, config, target=game.__name__)
    assert report.ok, str(report)
    assert report[CheckName.EXTENSION].outcome == Outcome.PASS  # seat 0's turns against the stand-in


def test_the_checker_flags_a_game_that_misaddresses_a_seats_news() -> None:
    report = check_conformance(_self_play(_misaddressed, opponent_seat("random")), CheckConfig(examples=6))
    assert not report.ok
    result = report[CheckName.NO_RAISE]
    assert result.outcome == Outcome.FAIL and "the game failed" in result.detail, str(report)
    # the same group with the real game passes
    assert check_conformance(_self_play(_real, opponent_seat("random")), CheckConfig(examples=6)).ok


def test_a_self_play_group_without_a_stand_in_is_refused_in_one_line() -> None:
    report = check_conformance(_self_play(_real, None), CheckConfig(examples=2))
    result = report[CheckName.MAKE_ENVS]
    assert result.outcome == Outcome.FAIL and "give SeatedGroupBuilder.stand_in" in result.detail
