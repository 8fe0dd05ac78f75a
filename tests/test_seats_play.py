"""``python -m envs.play <game>`` (envs.play_seat): a person takes a seat (input piped here), against scripted and model seats."""

from __future__ import annotations

import io

import anyio

from envs.play_seat import play


def _play(moves: str, **kw):
    out = io.StringIO()
    kwargs = dict(
        seat=0,
        opponent="optimal",
        games=1,
        seed=0,
        model="turngym/tiny-random-llama",
        root=None,
        temperature=0.0,
    )
    kwargs.update(kw)
    records = anyio.run(lambda: play("tictactoe", stdin=io.StringIO(moves), stdout=out, **kwargs))  # type: ignore[arg-type]
    return records, out.getvalue()


def test_a_person_plays_o_against_the_minimax_player_and_sees_every_board() -> None:
    records, text = _play("1\n2\n3\n4\n6\n7\n8\n9\n", seat=1)
    record = records[0]
    assert record.ok and record.seats[1].player == "you" and record.seats[0].player == "optimal"
    assert "You are O" in text and text.count("Your move.") == len(record.seats[1].trajectory.transitions)
    assert text.rstrip().splitlines()[-1].startswith("game over: ")
    assert record.seats[1].metrics["tictactoe/win"] == 0.0  # nobody beats minimax


def test_the_end_of_the_input_ends_the_game_cleanly() -> None:
    records, text = _play("5\n")
    assert records[0].stop_reason == "seat_error" and "EOFError" in text.splitlines()[-1]


def test_against_the_base_model() -> None:
    records, text = _play("5\n1\n2\n3\n", opponent="base")
    record = records[0]
    assert record.seats[1].player == "base" and "You are X" in text and "game over: " in text
    assert record.seats[1].trajectory.transitions  # the model played its seat through the loop
