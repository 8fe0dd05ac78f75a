"""The knowledge-base answerer on a fixed set of phrased questions (tests/fixtures), and what it
refuses to answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.twenty_questions import ALL_WORDS, Answer, KBAnswerer, understand

FIXTURE = Path(__file__).parent / "fixtures" / "twenty_questions_questions.jsonl"
CASES = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]


def test_fixture_is_large_and_balanced():
    assert len(CASES) >= 100
    answers = [c["answer"] for c in CASES]
    assert answers.count("yes") >= 30 and answers.count("no") >= 30
    assert {c["word"] for c in CASES} <= set(ALL_WORDS)
    assert len({c["question"] for c in CASES}) >= 80


@pytest.mark.parametrize("case", CASES, ids=[f"{c['word']}: {c['question']}" for c in CASES])
def test_kb_answers_phrased_question(case):
    result = KBAnswerer().answer(case["word"], case["question"])
    assert result.answer == Answer(case["answer"]), result.raw
    assert not result.fallback


@pytest.mark.parametrize(
    "question",
    [
        "Is it heavier than a person?",
        "Is it bigger than a dog?",
        "What colour is it?",
        "Tell me more.",
        "Is it expensive?",
        "Would my grandmother like it?",
    ],
)
def test_kb_says_it_cannot_answer(question):
    result = KBAnswerer().answer("dog", question)
    assert result.answer == Answer.UNKNOWN
    assert result.raw  # the reason is recorded for transcripts


def test_unknown_secret_word_is_unknown_not_an_error():
    assert KBAnswerer().answer("zeppelin", "Is it an animal?").answer == Answer.UNKNOWN


def test_or_and_not_combine_concepts():
    assert understand("Is it a fruit or a vegetable?").disjunction
    assert not understand("Is it an animal that can fly?").disjunction
    assert understand("Is it not alive?").negated
    kb = KBAnswerer()
    assert kb.answer("bee", "Is it an animal that can fly?").answer == Answer.YES
    assert kb.answer("dog", "Is it an animal that can fly?").answer == Answer.NO
    assert kb.answer("rock", "Is it not alive?").answer == Answer.YES
