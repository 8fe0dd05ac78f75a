"""Twenty Questions: rules, rewards, stop reasons and metrics with both answerers; guesses;
knowledge base coverage; builders, dataset and cookbook compatibility."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field

import chz
import pytest
import tinker
from hypothesis import given
from hypothesis import strategies as st
from tinker_cookbook.completers import MessageCompleter, StopCondition, TokenCompleter, TokensWithLogprobs
from tinker_cookbook.renderers import Message, get_text_content
from tinker_cookbook.rl.rollouts import do_group_rollout
from tinker_cookbook.rl.types import ActionExtra, StopReason

from envs.twenty_questions import (
    ALL_WORDS,
    TEST_WORDS,
    TRAIN_WORDS,
    Answer,
    Attribute,
    FixedPlayer,
    KBAnswerer,
    KBOptimalPlayer,
    LLMAnswerer,
    Metric,
    TwentyQuestionsConfig,
    TwentyQuestionsDataset,
    TwentyQuestionsDatasetBuilder,
    TwentyQuestionsEnv,
    TwentyQuestionsGame,
    TwentyQuestionsGroupBuilder,
    parse_yes_no,
    pick_candidates,
    play_with_player,
    player_prompt,
    scripted_game,
    understand,
)
from envs.twenty_questions._kb import QUESTIONS, default_kb
from envs.twenty_questions._text import TurnKind, classify_turn, parse_guess
from envs.twenty_questions.answerers import ANSWERER_PROMPT
from envs.twenty_questions.env import FORMAT_REMINDER, is_correct_guess
from envs.twenty_questions.scripted import text_to_action

SECRET = "dog"
WRONG = "cat"


@dataclass
class YesNoCompleter(MessageCompleter):
    """A scripted LLM answerer: answers from the KB ("Yes, it is." / "no"), or a fixed reply."""

    fixed: str | None = None
    calls: list[list[Message]] = field(default_factory=list)

    async def __call__(self, messages: list[Message]) -> Message:
        self.calls.append(messages)
        if self.fixed is not None:
            return {"role": "assistant", "content": self.fixed}
        prompt = get_text_content(messages[-1])
        word, question = prompt.split("The secret word is ")[1].split(". ", 1)
        answer = KBAnswerer().answer(word, question.removesuffix(" Answer only yes or no.")).answer
        return {"role": "assistant", "content": "Yes, it is." if answer == Answer.YES else "no"}


ANSWERERS = {
    "kb": lambda: KBAnswerer(),
    "llm": lambda: LLMAnswerer(YesNoCompleter()),
}


CLASSIC = {"max_questions": 20, "candidates": 0, "question_reward": 0.0, "play_truncated": False}
"""The classic game (the mechanics under test; the default setting is the easy one ``train.py`` trains)."""


def classic(**fields) -> TwentyQuestionsConfig:
    """The classic game with ``fields`` changed."""
    return TwentyQuestionsConfig(**{**CLASSIC, **fields})


def make_env(renderer, answerer_kind: str = "kb", word: str = SECRET, **config) -> TwentyQuestionsEnv:
    return TwentyQuestionsEnv(renderer, word, ANSWERERS[answerer_kind](), classic(**config))


async def run_actions(env: TwentyQuestionsEnv, actions: Sequence[tuple[list[int], ActionExtra]]):
    """Step through raw token actions (the last one repeats) until the episode ends."""
    start = await env.initial_observation()
    assert isinstance(start, tuple)
    ob = start[0].to_ints()
    results = []
    for i in range(100):
        action, extra = actions[min(i, len(actions) - 1)]
        result = await env.step(action, extra=extra)
        results.append(result)
        if result.episode_done:
            return results
        nxt = result.next_observation.to_ints()
        assert nxt[: len(ob) + len(action)] == ob + action, "token-in/token-out: observation must extend"
        ob = nxt
    raise AssertionError("episode did not end")


def stop_reason(result) -> StopReason:
    (key,) = [k for k in result.metrics if k.startswith("stop/")]
    return StopReason(key.removeprefix("stop/"))


# --- scripted players through the token env, both answerers --------------------------------


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_always_correct_wins_in_one_turn(renderer, answerer):
    env = make_env(renderer, answerer, max_questions=5, win_reward=1.0)
    record = asyncio.run(play_with_player(env, FixedPlayer(("Guess: dog",))))
    assert record.rewards == [1.0]
    assert record.stop_reason == StopReason.COMPLETED
    assert record.metrics[Metric.WIN] == 1.0
    assert record.metrics[Metric.TURNS] == 1.0
    assert record.metrics[Metric.GUESSES] == 1.0
    assert record.metrics[Metric.QUESTION_FRACTION] == 0.0
    assert record.metrics[Metric.TURNS_BEFORE_FINAL_GUESS] == 0.0


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_always_wrong_runs_out_of_turns(renderer, answerer):
    env = make_env(renderer, answerer, max_questions=4, wrong_guess_reward=-0.25)
    record = asyncio.run(play_with_player(env, FixedPlayer(("Guess: cat",))))
    assert record.rewards == [-0.25] * 4
    assert record.stop_reason == StopReason.MAX_TURNS
    assert record.metrics[Metric.WIN] == 0.0
    assert record.metrics[Metric.WRONG_GUESSES] == 4.0
    assert record.messages[2]["content"] == "No, it is not cat."


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_questions_earn_the_question_reward(renderer, answerer):
    env = make_env(renderer, answerer, max_questions=3, question_reward=-0.05)
    record = asyncio.run(play_with_player(env, FixedPlayer(("Is it alive?", "Guess: cat", "Is it big?"))))
    assert record.rewards == [-0.05, 0.0, -0.05]
    assert record.metrics[Metric.QUESTIONS] == 2.0
    assert record.stop_reason == StopReason.MAX_TURNS
    assert record.metrics[Metric.TURNS_BEFORE_FINAL_GUESS] == 3.0  # the last turn was a question


def test_turns_before_the_final_guess_leave_out_only_a_last_guess(renderer):
    env = make_env(renderer, max_questions=4)
    record = asyncio.run(
        play_with_player(env, FixedPlayer(("Is it alive?", "Guess: cat", "Is it big?", "Guess: cow")))
    )
    assert record.metrics[Metric.TURNS] == 4.0
    assert record.metrics[Metric.TURNS_BEFORE_FINAL_GUESS] == 3.0


def test_max_guesses_ends_the_game_lost(renderer):
    env = make_env(renderer, max_questions=10, max_guesses=2)
    record = asyncio.run(play_with_player(env, FixedPlayer(("Guess: cat", "Is it alive?", "Guess: cow"))))
    assert len(record.rewards) == 3
    assert record.stop_reason == StopReason.COMPLETED
    assert record.metrics[Metric.WIN] == 0.0
    assert record.metrics[Metric.QUESTIONS] == 1.0
    assert record.metrics[Metric.QUESTION_FRACTION] == pytest.approx(1 / 3)


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_garbage_gets_format_penalty_every_turn(renderer, answerer):
    env = make_env(renderer, answerer, max_questions=3, format_penalty=0.2)
    record = asyncio.run(play_with_player(env, FixedPlayer(("banana banana banana",))))
    assert record.rewards == [pytest.approx(-0.2)] * 3
    assert record.stop_reason == StopReason.MAX_TURNS
    assert record.metrics[Metric.FORMAT_VIOLATIONS] == 3.0
    assert record.metrics[Metric.QUESTIONS] == 0.0
    assert record.messages[2]["content"] == FORMAT_REMINDER
    assert FORMAT_REMINDER in renderer.tokenizer.decode(env.observation_tokens)


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_over_long_action_is_truncated_fault(renderer, answerer):
    env = make_env(renderer, answerer, max_questions=5, fault_penalty=0.3)
    tokens = renderer.tokenizer.encode("Is it a living thing that is", add_special_tokens=False)
    results = asyncio.run(run_actions(env, [(tokens, {"stop_reason": "length"})]))
    assert len(results) == 1
    assert results[0].reward == pytest.approx(-0.3)
    assert stop_reason(results[0]) == StopReason.MAX_TOKENS
    metrics = env.episode_metrics()
    assert metrics[Metric.FAULTS] == 1.0 and metrics[Metric.TURNS] == 1.0 and metrics[Metric.WIN] == 0.0
    assert env.stats.stop_reason == StopReason.MAX_TOKENS


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_invalid_utf8_is_parse_error_fault(renderer, answerer):
    bad = next(i for i in range(200, 400) if "\ufffd" in renderer.tokenizer.decode([i]))
    env = make_env(renderer, answerer, max_questions=5, fault_penalty=0.1)
    question = text_to_action(renderer, "Is it an animal?")
    results = asyncio.run(
        run_actions(env, [(question, {"stop_reason": "stop"}), ([bad, 2], {"stop_reason": "stop"})])
    )
    assert [r.reward for r in results] == [0.0, pytest.approx(-0.1)]
    assert stop_reason(results[-1]) == StopReason.PARSE_ERROR
    metrics = env.episode_metrics()
    assert (
        metrics[Metric.FAULTS] == 1.0 and metrics[Metric.TURNS] == 2.0 and metrics[Metric.ANSWERS_YES] == 1.0
    )


@pytest.mark.parametrize("answerer", ["kb", "llm"])
def test_optimal_player_wins_and_questions_are_answered_truthfully(renderer, answerer):
    word = "piano"
    env = make_env(renderer, answerer, word=word, max_questions=20)
    record = asyncio.run(play_with_player(env, KBOptimalPlayer(max_questions=20)))
    assert record.won and record.rewards[-1] == 1.0
    kb = default_kb()
    questions = 0
    for asked, reply in zip(record.messages[1::2], record.messages[2::2], strict=False):
        attribute = next((a for a, q in QUESTIONS.items() if q == asked["content"]), None)
        if attribute is not None:
            questions += 1
            assert reply["content"] == ("Yes." if kb.has(word, attribute) else "No.")
    assert questions >= 3
    assert record.metrics[Metric.QUESTIONS] == questions
    guesses = record.metrics[Metric.GUESSES]
    assert guesses == record.metrics[Metric.WRONG_GUESSES] + 1  # piano and harp share every attribute
    assert record.metrics[Metric.TURNS] == len(record.rewards) == questions + guesses
    # same game without tokens
    assert scripted_game(word, config=classic()).messages == record.messages


def test_llm_answerer_fallback_is_counted_and_shown(renderer):
    completer = YesNoCompleter(fixed="I am not sure, maybe.")
    env = TwentyQuestionsEnv(renderer, SECRET, LLMAnswerer(completer), classic(max_questions=2))
    record = asyncio.run(play_with_player(env, FixedPlayer(("Is it an animal?",))))
    assert record.metrics[Metric.ANSWERER_FALLBACKS] == 2.0
    assert record.metrics[Metric.ANSWERS_UNKNOWN] == 2.0
    assert record.messages[2]["content"] == "I can't answer that."
    # the answerer saw the secret and the question, nothing of the game before
    (prompt,) = completer.calls[0]
    assert get_text_content(prompt) == ANSWERER_PROMPT.format(word="dog", question="Is it an animal?")


def test_llm_answerer_fallback_is_configurable(renderer):
    env = TwentyQuestionsEnv(
        renderer,
        SECRET,
        LLMAnswerer(YesNoCompleter(fixed="hmm"), fallback=Answer.NO),
        classic(),
    )
    record = asyncio.run(play_with_player(env, FixedPlayer(("Is it an animal?", "Guess: dog"))))
    assert record.messages[2]["content"] == "No."
    assert record.metrics[Metric.ANSWERER_FALLBACKS] == 1.0 and record.metrics[Metric.ANSWERS_NO] == 1.0


def test_kb_unknown_question_is_counted(renderer):
    env = make_env(renderer, max_questions=2)
    record = asyncio.run(play_with_player(env, FixedPlayer(("Is it heavier than a person?", "Guess: dog"))))
    assert record.messages[2]["content"] == "I can't answer that."
    assert record.metrics[Metric.ANSWERS_UNKNOWN] == 1.0 and record.metrics[Metric.ANSWERER_FALLBACKS] == 0.0
    assert record.won


def test_efficiency_bonus(renderer):
    env = make_env(renderer, max_questions=4, efficiency_bonus=0.5)
    record = asyncio.run(play_with_player(env, FixedPlayer(("Is it alive?", "Is it a pet?", "Guess: dogs"))))
    assert record.rewards == [0.0, 0.0, pytest.approx(1.0 + 0.5 * (4 - 2) / 4)]
    first = asyncio.run(
        play_with_player(
            make_env(renderer, max_questions=4, efficiency_bonus=0.5), FixedPlayer(("Guess: dog",))
        )
    )
    assert first.rewards == [pytest.approx(1.5)]


def test_one_episode_is_one_token_sequence(renderer):
    env = make_env(renderer, max_questions=6)
    asyncio.run(play_with_player(env, FixedPlayer(("Is it an animal?", "Is it a pet?", "Guess: dog"))))
    assert env.rerenders == 0  # the qwen3_instruct renderer has the extension property
    text = renderer.tokenizer.decode(env.observation_tokens)
    assert text.count("Is it a pet?") == 1 and text.rstrip().endswith("Guess: dog<|im_end|>")


# --- prompt and candidates ----------------------------------------------------------------


def test_prompt_lists_candidates_and_format(renderer):
    cands = pick_candidates(SECRET, 4, TRAIN_WORDS, seed=3)
    config = classic(max_questions=4, candidates=4)
    prompt = player_prompt(config, cands)
    assert "Guess: <word>" in prompt and "4 turns" in prompt
    assert all(w in prompt for w in cands)
    assert "one of" not in player_prompt(classic())
    # short enough for a 135M model
    assert len(renderer.tokenizer.encode(prompt)) < 80


@given(st.sampled_from(ALL_WORDS), st.integers(1, 12), st.integers(0, 10**6))
def test_candidates_are_deterministic_and_contain_the_secret(word, k, seed):
    cands = pick_candidates(word, k, ALL_WORDS, seed=seed)
    assert cands == pick_candidates(word, k, ALL_WORDS, seed=seed)
    assert len(cands) == k == len(set(cands)) and word in cands


def test_candidates_errors_are_clear():
    with pytest.raises(ValueError, match="distractors"):
        pick_candidates("dog", 5, ["dog", "cat"])
    with pytest.raises(ValueError, match="not among the candidates"):
        TwentyQuestionsGame("dog", KBAnswerer(), None, ("cat", "cow"))
    with pytest.raises(ValueError, match="non-empty"):
        TwentyQuestionsGame("  ", KBAnswerer())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_questions": 0}, "max_questions"),
        ({"candidates": -1}, "candidates"),
        ({"max_guesses": 0}, "max_guesses"),
        ({"format_penalty": -1.0}, "penalty"),
        ({"prompt": "{nope}"}, "prompt template"),
    ],
)
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TwentyQuestionsConfig(**kwargs)


# --- guesses and turn classification -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "guess"),
    [
        ("Guess: dog", "dog"),
        ("guess:dog", "dog"),
        ("I think I know. GUESS: The Dogs!", "dogs"),
        ("**Guess:** `dog`", "dog"),
        ("Guess: <dog>", "dog"),
        ("Guess: a cat, a dog", "cat"),
        ("Guess: cat or dog", "cat"),
        ("Guess: cat\nGuess: dog", "cat"),
        ("Is it a dog? Guess: it's a dog", "dog"),
        ("No guess here, is it a dog?", None),
        ("Guess:", ""),
    ],
)
def test_parse_guess(text, guess):
    assert parse_guess(text) == guess


@given(
    st.sampled_from(ALL_WORDS),
    st.sampled_from(["", "a ", "an ", "the ", "The ", "A "]),
    st.sampled_from([str.lower, str.upper, str.title]),
    st.booleans(),
    st.text(alphabet="xyz .!,\n", max_size=20),
)
def test_guess_detection_is_robust(word, article, case, plural, prefix):
    said = case(word + ("s" if plural and not word.endswith("s") else ""))
    text = f"{prefix}Guess: {article}{said}."
    assert is_correct_guess(parse_guess(text) or "", word)


def test_wrong_and_synonym_guesses():
    assert not is_correct_guess("cat", "dog")
    assert not is_correct_guess("do", "dog")
    assert is_correct_guess("plane", "airplane")
    assert is_correct_guess("mice", "mouse")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Is it an animal?", TurnKind.QUESTION),
        ("Does it have legs", TurnKind.QUESTION),
        ("Hmm. Is it big?", TurnKind.QUESTION),
        ("Is it big? Is it red?", TurnKind.INVALID),
        ("I like turtles", TurnKind.INVALID),
        ("", TurnKind.INVALID),
        ("Is it big? Guess: dog", TurnKind.GUESS),
        ("Guess:", TurnKind.INVALID),
    ],
)
def test_classify_turn(text, kind):
    assert classify_turn(text).kind == kind


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("Yes", Answer.YES),
        ("no.", Answer.NO),
        ("Yes, it is.", Answer.YES),
        ("Nope!", Answer.NO),
        ("maybe", None),
    ],
)
def test_parse_yes_no(reply, answer):
    assert parse_yes_no(reply) == answer


# --- knowledge base -------------------------------------------------------------------------


def test_word_list_and_table_are_total():
    kb = default_kb()
    assert len(ALL_WORDS) >= 200 and len(Attribute) >= 30
    assert len(set(kb.kinds.values())) >= 15
    for word in ALL_WORDS:
        row = kb.row(word)
        assert set(row) == set(Attribute) and all(isinstance(v, bool) for v in row.values())
    for attribute in Attribute:  # every attribute discriminates
        yes = sum(kb.has(w, attribute) for w in ALL_WORDS)
        assert 0 < yes < len(ALL_WORDS), attribute


IMPLIES = [
    (
        {Attribute.MAMMAL, Attribute.BIRD, Attribute.FISH, Attribute.INSECT, Attribute.REPTILE},
        Attribute.ANIMAL,
    ),
    ({Attribute.ANIMAL, Attribute.PLANT}, Attribute.LIVING),
    ({Attribute.FRUIT, Attribute.VEGETABLE}, Attribute.FOOD),
    (
        {
            Attribute.ELECTRONIC,
            Attribute.VEHICLE,
            Attribute.FURNITURE,
            Attribute.TOOL,
            Attribute.CLOTHING,
            Attribute.INSTRUMENT,
            Attribute.BUILDING,
        },
        Attribute.MAN_MADE,
    ),
    ({Attribute.FOUR_LEGS}, Attribute.LEGS),
    ({Attribute.FEATHERS, Attribute.BIRD}, Attribute.WINGS),
    ({Attribute.FEATHERS}, Attribute.BIRD),
]
EXCLUDES = [
    (Attribute.LIVING, Attribute.MAN_MADE),
    (Attribute.LIVING, Attribute.FOOD),
    (Attribute.BIG, Attribute.HANDHELD),
    (Attribute.FRUIT, Attribute.VEGETABLE),
    (Attribute.FOOD, Attribute.DRINK),
    (Attribute.MAMMAL, Attribute.BIRD),
]


def test_table_is_consistent():
    kb = default_kb()
    for word in ALL_WORDS:
        for premises, conclusion in IMPLIES:
            if any(kb.has(word, p) for p in premises):
                assert kb.has(word, conclusion), (word, premises, conclusion)
        for a, b in EXCLUDES:
            assert not (kb.has(word, a) and kb.has(word, b)), (word, a, b)


def test_canonical_questions_are_understood_as_their_attribute():
    for attribute, question in QUESTIONS.items():
        u = understand(question)
        assert [c.attribute for c in u.concepts] == [attribute] and not u.negated, question
        assert not any(c.negated for c in u.concepts)


@given(st.sampled_from(ALL_WORDS), st.sampled_from(ALL_WORDS))
def test_naming_a_word_is_answered_by_identity(secret, named):
    article = "an" if named[0] in "aeiou" else "a"
    result = KBAnswerer().answer(secret, f"Is it {article} {named}?")
    assert result.answer == (Answer.YES if secret == named else Answer.NO)


def test_optimal_player_wins_every_word_within_twenty():
    for word in ALL_WORDS[::5]:
        record = scripted_game(word, config=classic())
        assert record.won and record.metrics[Metric.TURNS] <= 20, word
        assert record.metrics[Metric.ANSWERS_UNKNOWN] == 0.0


def test_optimal_player_wins_four_candidate_games_in_four_turns():
    turns = []
    for i, word in enumerate(TRAIN_WORDS[::7]):
        cands = pick_candidates(word, 4, TRAIN_WORDS, seed=i)
        record = scripted_game(word, cands, config=classic(max_questions=4, candidates=4))
        assert record.won, (word, cands, record.messages)
        turns.append(len(record.rewards))
    assert sum(turns) / len(turns) <= 3.0  # two halving questions and a guess, mostly


# --- splits, builders, dataset --------------------------------------------------------------


def test_splits_are_fixed_disjoint_and_cover_all_words():
    assert set(TRAIN_WORDS).isdisjoint(TEST_WORDS)
    assert set(TRAIN_WORDS) | set(TEST_WORDS) == set(ALL_WORDS)
    assert 0.1 < len(TEST_WORDS) / len(ALL_WORDS) < 0.35


def make_dataset(**kwargs) -> TwentyQuestionsDataset:
    defaults = dict(batch_size=3, group_size=2, answerer=KBAnswerer(), env=classic(candidates=4), seed=7)
    return TwentyQuestionsDataset(TRAIN_WORDS, **{**defaults, **kwargs})  # type: ignore[arg-type]


def test_get_batch_is_deterministic_in_the_index():
    a, b = make_dataset(num_batches=200), make_dataset(num_batches=200)
    for i in (0, 1, 64, 65, 199):  # 64/65 cross an epoch boundary (194 words / 3)
        ba, bb = a.get_batch(i), b.get_batch(i)
        assert [(g.word, g.candidates) for g in ba] == [(g.word, g.candidates) for g in bb]
        assert all(len(g.candidates) == 4 and g.word in g.candidates and g.group_size == 2 for g in ba)
    # resuming at batch i without visiting earlier batches gives the same batch
    fresh = make_dataset(num_batches=200)
    assert [g.word for g in fresh.get_batch(150)] == [g.word for g in a.get_batch(150)]
    other = make_dataset(num_batches=200, seed=8)
    assert [g.word for i in range(5) for g in other.get_batch(i)] != [
        g.word for i in range(5) for g in a.get_batch(i)
    ]
    # one epoch visits every word once
    epoch = [make_dataset(batch_size=2).item(j)[0] for j in range(len(TRAIN_WORDS))]
    assert sorted(epoch) == sorted(TRAIN_WORDS)
    with pytest.raises(IndexError):
        a.get_batch(200)


def test_builder_pickles_and_makes_a_group_on_one_word(renderer):
    builder = make_dataset().get_batch(0)[0]
    clone = pickle.loads(pickle.dumps(builder))
    assert clone == builder
    envs = asyncio.run(clone.make_envs())
    assert len(envs) == 2 and all(isinstance(e, TwentyQuestionsEnv) and e.word == builder.word for e in envs)
    first = [asyncio.run(e.initial_observation()) for e in envs]
    assert all(isinstance(f, tuple) for f in first)
    assert first[0][0].to_ints() == first[1][0].to_ints()  # type: ignore[index]


def test_dataset_builder_is_chz_and_builds_train_and_test():
    builder = TwentyQuestionsDatasetBuilder(batch_size=4, group_size=2, env=classic(candidates=3))
    assert pickle.loads(pickle.dumps(builder)) == builder
    train, test = asyncio.run(builder())
    assert len(train) == len(TRAIN_WORDS) // 4
    train_words = {g.word for i in range(len(train)) for g in train.get_batch(i)}
    test_groups = [g for i in range(len(test)) for g in test.get_batch(i)]
    assert train_words <= set(TRAIN_WORDS)
    assert {g.word for g in test_groups} == set(TEST_WORDS)
    assert all(set(g.candidates) <= set(TEST_WORDS) for g in test_groups)  # held out, distractors too
    assert all(g.group_size == builder.test_group_size for g in test_groups)
    replaced = chz.replace(builder, num_batches=3)
    assert len(asyncio.run(replaced())[0]) == 3


class AskThenGuessPolicy(TokenCompleter):
    """A token policy: asks one question, then (once an answer is in the observation) guesses."""

    def __init__(self, renderer, question: str, guess: str):
        self.renderer, self.question, self.guess = renderer, question, guess

    async def __call__(self, model_input: tinker.ModelInput, stop: StopCondition, *, max_tokens=None):
        seen = self.renderer.tokenizer.decode(model_input.to_ints())
        text = self.guess if self.question in seen else self.question
        tokens = text_to_action(self.renderer, text)
        return TokensWithLogprobs(tokens, [0.0] * len(tokens), "stop")


def test_runs_in_the_cookbooks_own_rollout(renderer):
    builder = TwentyQuestionsGroupBuilder(
        word=SECRET, group_size=2, answerer=KBAnswerer(), env=classic(max_questions=3)
    )
    group = asyncio.run(
        do_group_rollout(builder, AskThenGuessPolicy(renderer, "Is it a mammal?", "Guess: dog"))
    )
    assert group.get_total_rewards() == [1.0, 1.0]
    for trajectory, metrics in zip(group.trajectories_G, group.metrics_G, strict=True):
        assert trajectory.stop_reason == StopReason.COMPLETED and len(trajectory.transitions) == 2
        assert (
            metrics[Metric.WIN] == 1.0
            and metrics[Metric.QUESTIONS] == 1.0
            and metrics[Metric.ANSWERS_YES] == 1.0
        )


# --- properties: any input is handled, and the accounting always adds up ----------------------


@given(st.text(max_size=200), st.sampled_from(ALL_WORDS))
def test_kb_answerer_and_parsers_accept_any_text(text, word):
    result = KBAnswerer().answer(word, text)
    assert result.answer in Answer
    assert classify_turn(text).kind in TurnKind
    guess = parse_guess(text)
    assert guess is None or guess == guess.lower()


TEXTS = st.sampled_from(
    [
        "Is it an animal?",
        "Is it bigger than a microwave?",
        "Is it heavier than a car?",
        "Guess: cat",
        "Guess: the dogs",
        "Guess: cow, dog",
        "blah",
        "Is it red? Is it big?",
        "",
    ]
)


@given(
    st.lists(st.one_of(TEXTS, st.lists(st.integers(0, 49151), max_size=8)), min_size=1, max_size=8),
    st.booleans(),
)
def test_reward_and_metric_accounting_adds_up(renderer, actions, truncate_last):
    config = classic(
        max_questions=6,
        wrong_guess_reward=-0.2,
        question_reward=-0.05,
        format_penalty=0.1,
        fault_penalty=0.3,
        max_guesses=3,
    )
    env = TwentyQuestionsEnv(renderer, SECRET, KBAnswerer(), config)

    async def main():
        start = await env.initial_observation()
        assert isinstance(start, tuple)
        rewards, done = [], False
        for i, action in enumerate(actions):
            tokens = text_to_action(renderer, action) if isinstance(action, str) else list(action)
            last = i == len(actions) - 1
            extra: ActionExtra = {"stop_reason": "length" if last and truncate_last else "stop"}
            result = await env.step(tokens, extra=extra)
            rewards.append(result.reward)
            if result.episode_done:
                done = True
                break
        return rewards, done

    rewards, done = asyncio.run(main())
    m = env.episode_metrics()
    assert m[Metric.TURNS] == len(rewards) == env.turn
    assert (
        m[Metric.TURNS]
        == m[Metric.QUESTIONS] + m[Metric.GUESSES] + m[Metric.FORMAT_VIOLATIONS] + m[Metric.FAULTS]
    )
    assert m[Metric.QUESTIONS] == m[Metric.ANSWERS_YES] + m[Metric.ANSWERS_NO] + m[Metric.ANSWERS_UNKNOWN]
    assert m[Metric.GUESSES] == m[Metric.WRONG_GUESSES] + m[Metric.WIN]
    expected = (
        m[Metric.WIN] * 1.0
        - 0.2 * m[Metric.WRONG_GUESSES]
        - 0.05 * m[Metric.QUESTIONS]
        - 0.1 * m[Metric.FORMAT_VIOLATIONS]
        - 0.3 * m[Metric.FAULTS]
    )
    assert sum(rewards) == pytest.approx(expected)
    assert m[Metric.FAULTS] <= 1 and (m[Metric.FAULTS] == 0 or done)
    if done:
        assert env.stats.stop_reason is not None
        if env.stats.stop_reason == StopReason.MAX_TURNS:
            assert m[Metric.TURNS] == config.max_questions
    else:
        assert m[Metric.TURNS] < config.max_questions and m[Metric.WIN] == 0.0


def test_llm_answerer_rejects_a_bad_prompt():
    with pytest.raises(ValueError, match="must use only"):
        LLMAnswerer(YesNoCompleter(), prompt="The secret is {secret}")


def test_turns_are_logged_to_the_cookbooks_transcripts(renderer, tmp_path):
    from tinker_cookbook.utils import logtree

    path = tmp_path / "trace.html"
    with logtree.init_trace("twenty questions", path=path):
        asyncio.run(play_with_player(make_env(renderer), FixedPlayer(("Is it a cat?", "Guess: dog"))))
    html = path.read_text()
    assert "Is it a cat?" in html and "Reply: No." in html
    assert "Game over - secret: dog, won: True" in html


def test_dataset_builder_llm_answerer_on_the_local_backend(renderer):
    """The whole LLM-answerer path, offline: a tiny random local model answers (badly: counted)."""
    from backend import TINY

    builder = TwentyQuestionsDatasetBuilder(
        batch_size=1, group_size=1, answerer="llm", answerer_backend="local", answerer_base_model=TINY
    )
    answerer = builder.make_answerer()
    assert isinstance(answerer, LLMAnswerer)
    train, _ = builder.build(answerer)
    word = train.get_batch(0)[0].word
    env = TwentyQuestionsEnv(renderer, word, answerer, classic(max_questions=3))
    record = asyncio.run(
        play_with_player(env, FixedPlayer(("Is it an animal?", "Is it big?", f"Guess: {word}")))
    )
    m = record.metrics
    assert record.won and m[Metric.QUESTIONS] == 2.0
    assert m[Metric.ANSWERS_YES] + m[Metric.ANSWERS_NO] + m[Metric.ANSWERS_UNKNOWN] == 2.0
    assert m[Metric.ANSWERER_FALLBACKS] == m[Metric.ANSWERS_UNKNOWN]  # random replies are rarely yes/no


def test_dataset_builder_rejects_an_unknown_backend():
    with pytest.raises(ValueError, match="answerer_backend"):
        TwentyQuestionsDatasetBuilder(answerer_backend="cloud")


def test_readme_example_runs_verbatim(capsys):
    import re
    from pathlib import Path

    import envs.twenty_questions as package

    readme = (Path(package.__file__).parent / "README.md").read_text()
    match = re.search(r"<!-- example:twenty_questions -->\s*```python\n(.*?)```", readme, re.DOTALL)
    assert match, "envs/twenty_questions/README.md lost its example"
    exec(compile(match.group(1), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("user: Let's play twenty questions.") and "assistant: Guess: dog" in out
