"""``play_truncated``: a turn cut by ``max_tokens`` is played as written and the history still extends."""

from __future__ import annotations

import asyncio

import pytest
from test_twenty_questions import SECRET, make_env, run_actions, stop_reason
from tinker_cookbook.rl.types import StopReason

from envs.twenty_questions import Metric


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_truncated_guess_is_played_and_wins(renderer, answerer):
    env = make_env(renderer, answerer, max_questions=4, play_truncated=True, fault_penalty=0.3)
    tokens = renderer.tokenizer.encode(f"Guess: {SECRET}. I think that it is", add_special_tokens=False)
    results = asyncio.run(run_actions(env, [(tokens, {"stop_reason": "length"})]))
    assert len(results) == 1 and results[0].reward == pytest.approx(1.0)
    assert stop_reason(results[0]) == StopReason.COMPLETED
    metrics = env.episode_metrics()
    assert metrics[Metric.WIN] == 1.0 and metrics[Metric.TURNS] == 1.0 and metrics[Metric.FAULTS] == 1.0


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_truncated_turns_extend_the_history_without_rerender(renderer, answerer):
    env = make_env(renderer, answerer, max_questions=3, play_truncated=True, format_penalty=0.1)
    tokens = renderer.tokenizer.encode("Well, let me think about what that is", add_special_tokens=False)
    # run_actions asserts that every observation extends the previous observation + action
    results = asyncio.run(run_actions(env, [(tokens, {"stop_reason": "length"})]))
    assert len(results) == 3 and stop_reason(results[-1]) == StopReason.MAX_TURNS
    assert env.rerenders == 0
    assert [r.reward for r in results] == [pytest.approx(-0.1)] * 3  # not a question: format penalty
    closed = renderer.tokenizer.decode(env.observation_tokens)
    # each truncated turn the game played on is closed by the end-of-turn token (the last one ends it)
    assert closed.count("that is<|im_end|>") == 2 and closed.endswith("that is")
    assert env.episode_metrics()[Metric.TURNS] == 3.0


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_truncation_penalty_is_added_to_what_a_played_turn_earns(renderer, answerer):
    env = make_env(
        renderer, answerer, max_questions=3, play_truncated=True, truncation_penalty=0.05, format_penalty=0.1
    )
    cut = renderer.tokenizer.encode("Guess: cat, or maybe it is", add_special_tokens=False)
    whole = renderer.tokenizer.encode("Is it alive?<|im_end|>", add_special_tokens=False)
    rambling = renderer.tokenizer.encode("Well, let me think about", add_special_tokens=False)
    results = asyncio.run(
        run_actions(
            env,
            [
                (cut, {"stop_reason": "length"}),
                (whole, {"stop_reason": "stop"}),
                (rambling, {"stop_reason": "length"}),
            ],
        )
    )
    # a cut wrong guess: -0.05; a finished question: 0; a cut non-answer: -0.1 - 0.05
    assert [r.reward for r in results] == [pytest.approx(-0.05), pytest.approx(0.0), pytest.approx(-0.15)]


def test_truncation_penalty_must_not_be_negative():
    with pytest.raises(ValueError, match="truncation_penalty"):
        make_env(None, truncation_penalty=-0.1)
