"""The halving player: binary search over the listed candidates with set questions."""

from __future__ import annotations

import asyncio
import math

import pytest

from envs.twenty_questions import (
    TRAIN_WORDS,
    HalvingPlayer,
    KBAnswerer,
    Metric,
    TwentyQuestionsConfig,
    TwentyQuestionsGame,
    pick_candidates,
    play_game,
    set_question,
    understand,
)


def test_set_question_phrasing_is_understood_as_membership():
    assert set_question(["cat"]) == "Is it cat?"
    assert set_question(["cat", "dog"]) == "Is it cat or dog?"
    assert set_question(["cat", "dog", "apple"]) == "Is it cat, dog or apple?"
    with pytest.raises(ValueError):
        set_question([])
    answerer = KBAnswerer()
    question = set_question(["cat", "dog", "apple", "car"])
    assert understand(question).disjunction
    assert answerer.answer("car", question).answer == "yes"
    assert answerer.answer("banana", question).answer == "no"


@pytest.mark.parametrize(("k", "turns"), [(8, 4), (4, 3), (16, 5), (5, 4)])
def test_halving_player_wins_within_log2_turns(k: int, turns: int):
    """k candidates need ceil(log2 k) - 1 questions + 2 guesses at most; every game is won."""
    assert math.ceil(math.log2(k)) + 1 <= turns
    config = TwentyQuestionsConfig(max_questions=turns, candidates=k)
    for i, word in enumerate(TRAIN_WORDS[:60]):
        candidates = pick_candidates(word, k, TRAIN_WORDS, seed=i)
        game = TwentyQuestionsGame(word, KBAnswerer(), config, candidates)
        record = asyncio.run(play_game(HalvingPlayer(tuple(candidates), max_questions=turns), game))
        assert record.won, record.messages
        assert record.metrics[Metric.FORMAT_VIOLATIONS] == 0
        assert record.metrics[Metric.QUESTIONS] >= 1  # k > 2: it always asks first


def test_halving_player_beats_enumeration_where_enumeration_cannot_win():
    """8 candidates, 4 turns: guessing in turn wins at most half; halving wins all."""
    config = TwentyQuestionsConfig(max_questions=4, candidates=8)
    wins = {"halving": 0, "enumerate": 0}
    words = TRAIN_WORDS[:40]
    for i, word in enumerate(words):
        candidates = pick_candidates(word, 8, TRAIN_WORDS, seed=100 + i)
        game = TwentyQuestionsGame(word, KBAnswerer(), config, candidates)
        record = asyncio.run(play_game(HalvingPlayer(tuple(candidates), max_questions=4), game))
        wins["halving"] += record.won
        wins["enumerate"] += word in candidates[:4]
    assert wins["halving"] == len(words)
    assert wins["enumerate"] < len(words)


def test_halving_player_needs_candidates():
    with pytest.raises(ValueError):
        HalvingPlayer(())
