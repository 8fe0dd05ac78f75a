"""The programmatic pairwise judge (``rules``) and task reference answers."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from tinker_cookbook.renderers import Message

from envs.judge import Judge, JudgeConfig, JudgeTask, PairwiseGroupBuilder, load_tasks, run_tournament
from envs.judge.pairwise import comparison_prompt, parse_preference
from envs.judge.preference import PROMPTS_FILE
from envs.judge.registry import make_completer
from envs.judge.rules import RuleJudge, complete, concise, correct, reply_text


def said(text: str) -> list[Message]:
    return [{"role": "assistant", "content": text}]


QUESTION: list[Message] = [{"role": "user", "content": "What is the capital of Italy?"}]


def verdict(judge: RuleJudge, a: str, b: str, reference: tuple[str, ...] = ("Rome",)) -> float | None:
    prompt = comparison_prompt(QUESTION, said(a), said(b), reference=reference)
    reply = anyio.run(judge, prompt)
    return parse_preference(str(reply["content"]))


def test_checks() -> None:
    assert correct("The capital is Rome.", ["Rome"]) == 1.0
    assert correct("rome, of course", ["Rome"]) == 1.0  # any case
    assert correct("Romeo is not a city.", ["Rome"]) == 0.0  # whole words only
    assert correct("Cows like apples.", ["apple"]) == 1.0  # an optional plural
    assert correct("9 plus 16 is 250.", ["25"]) == 0.0 and correct("It is 25.", ["25"]) == 1.0
    assert correct("Rome.", []) == 0.0  # no reference: neutral
    assert complete("It is Rome.", []) == 1.0 and complete('He said "Rome!"', []) == 1.0
    assert complete("Rome is the capital of", []) == 0.0
    assert concise("Rome is the capital.", []) == -4.0


def test_verdicts_are_lexicographic_and_position_free() -> None:
    judge = RuleJudge()
    # correct beats wrong, however long and unfinished
    assert verdict(judge, "Florence.", "Rome is the capital of Italy and it is") == 1.0
    assert verdict(judge, "Rome is the capital of Italy and it is", "Florence.") == 0.0
    # both correct: the finished answer, then the shorter one
    assert verdict(judge, "Rome is the capital of Italy and", "The capital of Italy is Rome.") == 1.0
    assert verdict(judge, "The capital of Italy is Rome.", "Rome.") == 1.0
    assert verdict(judge, "Rome.", "Rome!") == 0.5
    # without a reference, correctness ties and concision decides
    assert verdict(judge, "Rome, a city in Italy.", "Florence.", reference=()) == 1.0
    # another order of checks
    assert verdict(RuleJudge(["concise"]), "Florence.", "Rome is the capital.") == 0.0


def test_spec_and_errors() -> None:
    judge = make_completer(JudgeConfig("rules:complete,concise"))
    assert isinstance(judge, RuleJudge) and judge.checks == ("complete", "concise")
    default = make_completer(JudgeConfig("rules"))
    assert isinstance(default, RuleJudge) and default.checks == ("correct", "complete", "concise")
    with pytest.raises(ValueError, match="unknown or no checks"):
        make_completer(JudgeConfig("rules:correct,polite"))
    with pytest.raises(ValueError, match="no response blocks"):
        grading: list[Message] = [{"role": "user", "content": "Grade this. Score: N/10"}]
        anyio.run(default, grading)


def test_reply_text_keeps_the_assistant_turns() -> None:
    assert reply_text("Assistant: Rome.") == "Rome."
    assert reply_text("Assistant: Hi.\n\nUser: And?\n\nAssistant: Rome.") == "Hi.\n\nRome."
    assert reply_text("plain text") == "plain text"


def test_tournament_with_a_reference_ranks_the_group() -> None:
    judge = Judge(JudgeConfig("rules"))
    answers = [
        said("Florence is the capital of Italy."),
        said("The capital of Italy is Rome."),
        said("Rome."),
        said("Rome is the capital of Italy and"),
    ]
    result = anyio.run(lambda: run_tournament(judge, QUESTION, answers, reference=("Rome",)))
    assert result.rewards == pytest.approx((0.0, 2 / 3, 1.0, 1 / 3))
    assert judge.stats.fallbacks == 0


def test_task_reference_reaches_the_comparison_prompt(tmp_path: Path) -> None:
    task = JudgeTask.from_dict({"id": "t", "prompt": "Capital of Italy?", "reference": "Rome"})
    assert task.reference == ("Rome",)
    assert JudgeTask.from_dict({"prompt": "p", "reference": ["a", " b "]}).reference == ("a", "b")
    assert JudgeTask.from_dict({"prompt": "p"}).reference == ()
    with pytest.raises(ValueError, match="'reference' must be a string or a list"):
        JudgeTask.from_dict({"prompt": "p", "reference": 3})
    with pytest.raises(ValueError, match="non-empty one-line"):
        JudgeTask.from_dict({"prompt": "p", "reference": ["a\nb"]})
    prompt = str(comparison_prompt(QUESTION, said("A"), said("B"), reference=task.reference)[1]["content"])
    assert "<reference>\nRome\n</reference>" in prompt
    assert "<reference>" not in str(comparison_prompt(QUESTION, said("A"), said("B"))[1]["content"])

    seen: list[str] = []

    class Spy(RuleJudge):
        async def __call__(self, messages):  # type: ignore[no-untyped-def]
            seen.append(str(messages[1]["content"]))
            return await super().__call__(messages)

    from envs.judge import registry

    registry.register_completer("spy_rules", lambda config, arg: Spy(), replace=True)
    builder = PairwiseGroupBuilder(task=task, judge=JudgeConfig("spy_rules"), group_size=2)
    envs = anyio.run(builder.make_envs)
    for env, text in zip(envs, ("Florence.", "Rome."), strict=True):
        env.final_transcript = [*task.messages, *said(text)]  # type: ignore[list-item]
    rewards = anyio.run(builder.compute_group_rewards, [None, None], envs)  # type: ignore[arg-type]
    assert [r for r, _ in rewards] == [0.0, 1.0]
    assert seen and all("<reference>\nRome\n</reference>" in s for s in seen)


def test_shipped_preference_prompts_have_references() -> None:
    tasks = load_tasks(PROMPTS_FILE)
    with_reference = [t for t in tasks if t.reference]
    assert len(tasks) == 48 and len(with_reference) >= 40
    rows = [json.loads(line) for line in PROMPTS_FILE.read_text().splitlines() if line.strip()]
    assert len({r["id"] for r in rows}) == len(rows)
