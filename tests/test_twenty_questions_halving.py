"""The halving player: binary search over the listed candidates with set questions."""

from __future__ import annotations

import asyncio
import math

import pytest
from tinker_cookbook.renderers import Message

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


def test_exact_questions_keep_the_first_splits_in_half_and_the_noise_after():
    """``split_noise=1, exact_questions=1``: the first question names half the words in every
    game; later questions keep the noisy player's draws (the same as without ``exact_questions``)."""
    candidates = tuple(pick_candidates(TRAIN_WORDS[0], 8, TRAIN_WORDS, seed=0))
    opening: list[Message] = [{"role": "user", "content": "Pick one."}]
    firsts = {
        HalvingPlayer(candidates, max_questions=4, split_noise=1.0, exact_questions=1, seed=s).next_text(
            opening
        )
        for s in range(20)
    }
    assert firsts == {set_question(list(candidates[:4]))}
    noisy = {
        HalvingPlayer(candidates, max_questions=4, split_noise=1.0, seed=s).next_text(opening)
        for s in range(20)
    }
    assert len(noisy) > 1  # without it the first split is drawn
    later: list[Message] = [
        *opening,
        {"role": "assistant", "content": set_question(list(candidates[:4]))},
        {"role": "user", "content": "No."},
    ]
    for s in range(20):
        exact = HalvingPlayer(candidates, max_questions=4, split_noise=1.0, exact_questions=1, seed=s)
        plain = HalvingPlayer(candidates, max_questions=4, split_noise=1.0, seed=s)
        assert exact.next_text(later) == plain.next_text(later)
    with pytest.raises(ValueError, match="exact_questions"):
        HalvingPlayer(candidates, exact_questions=-1)
