"""Twenty Questions with two seats, both trainable: the asker and the answerer (the asymmetric
multi-seat example, :mod:`envs.seats`).

The asker (seat 0) asks yes/no questions or answers ``Guess: <word>``, as in
:class:`~envs.twenty_questions.env.TwentyQuestionsEnv`; the answerer (seat 1) is told the secret
word and answers each question it is passed. Who plays each seat is the builder's choice
(:func:`seated_builder`): the policy on both seats (both train, each centred within its own role),
the policy asking against a pinned answerer (a :class:`~envs.seats.Seat` with, e.g., the KB), or a
pinned asker (:class:`ScriptedAsker`) with the policy answering.

Rewards (:class:`SeatedConfig`): a right guess gives ``win_reward`` to both seats (they play
together); each answer the knowledge base can judge gives the answerer ``+truth_reward`` when it
agrees with the KB and ``-truth_reward`` when it does not (so an answerer cannot win by helping
the guess while lying). An answer with no yes or no in it is shown as "I can't answer that." and
judged as not agreeing. The asker's turns (questions, guesses, format violations) count against
``max_questions``; the game ends on a right guess or when they run out.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, Renderer, get_text_content

from envs.seats import Game, LoopConfig, Move, Seat, SeatedGroupBuilder
from envs.twenty_questions._kb import KnowledgeBase, default_kb
from envs.twenty_questions._text import TurnKind, classify_turn, same_word
from envs.twenty_questions.answerers import ANSWER_TEXT, WRONG_GUESS, Answer, KBAnswerer, parse_yes_no
from envs.twenty_questions.env import FORMAT_REMINDER

ASKER_PROMPT = (
    "Let's play twenty questions. I am thinking of a secret word. It is one of these words: {words}. "
    "You have {max_questions} turns. Each turn, ask one yes/no question, or answer `Guess: <word>`."
)
ANSWERER_PROMPT = (
    "We are playing twenty questions. The secret word is {word}. I will pass you the other "
    "player's questions; answer each one only yes or no."
)
METRIC_WIN = "twenty_questions/win"
METRIC_TRUE = "twenty_questions/answers_true"
"""Answers the KB agrees with (summed over the game)."""
METRIC_JUDGED = "twenty_questions/answers_judged"
"""Answers the KB could judge (summed over the game)."""


@dataclass(frozen=True)
class SeatedConfig:
    """Rules and rewards of the two-seat game (frozen, picklable)."""

    max_questions: int = 4
    win_reward: float = 1.0
    truth_reward: float = 0.25
    candidates: int = 8
    """Words listed to the asker (the secret among them)."""

    def __post_init__(self) -> None:
        if self.max_questions < 1 or self.candidates < 1:
            raise ValueError("max_questions and candidates must be >= 1")


class TwentyQuestionsGame(Game):
    """One game with a secret word and the candidates the asker is told."""

    roles = ("asker", "answerer")
    first_seat = 0

    def __init__(
        self, secret: str, candidates: Sequence[str], config: SeatedConfig, kb: KnowledgeBase
    ) -> None:
        self.secret = secret
        self.candidates = list(candidates)
        self.config = config
        self.kb = kb
        self.turns = 0
        self.question = ""

    def initial_messages(self, seat: int) -> list[Message]:
        if seat == 0:
            text = ASKER_PROMPT.format(
                words=", ".join(self.candidates), max_questions=self.config.max_questions
            )
        else:
            text = ANSWERER_PROMPT.format(word=self.secret)
        return [{"role": "user", "content": text}]

    def _out_of_turns(self, tell: str) -> Move | None:
        if self.turns < self.config.max_questions:
            return None
        return Move(done=True, metrics={0: {METRIC_WIN: 0.0}, 1: {METRIC_WIN: 0.0}}, logs={"last": tell})

    async def on_move(self, seat: int, message: Message) -> Move:
        text = get_text_content(message)
        if seat == 1:  # the answer to self.question
            said = parse_yes_no(text) or Answer.UNKNOWN
            truth = KBAnswerer(self.kb).answer(self.secret, self.question).answer
            judged = truth is not Answer.UNKNOWN
            agrees = judged and said is truth
            reward = (self.config.truth_reward if agrees else -self.config.truth_reward) if judged else 0.0
            return Move(
                messages={0: [{"role": "user", "content": ANSWER_TEXT[said]}]},
                rewards={1: reward},
                metrics={1: {METRIC_TRUE: float(agrees), METRIC_JUDGED: float(judged)}},
                next_seat=0,
                logs={"answer": str(said), "kb": str(truth)},
            )
        self.turns += 1
        turn = classify_turn(text)
        if turn.kind is TurnKind.GUESS and same_word(turn.text, self.secret):
            win = self.config.win_reward
            return Move(
                rewards={0: win, 1: win},
                done=True,
                metrics={0: {METRIC_WIN: 1.0}, 1: {METRIC_WIN: 1.0}},
                logs={"guess": turn.text},
            )
        if turn.kind is TurnKind.QUESTION:
            end = self._out_of_turns(turn.text)
            if end is not None:  # the last turn asked a question: no answer can help any more
                return end
            self.question = turn.text
            return Move(
                messages={1: [{"role": "user", "content": turn.text}]},
                next_seat=1,
                logs={"question": turn.text},
            )
        reply = WRONG_GUESS.format(guess=turn.text) if turn.kind is TurnKind.GUESS else FORMAT_REMINDER
        return self._out_of_turns(reply) or Move(
            messages={0: [{"role": "user", "content": reply}]}, next_seat=0
        )


class ScriptedAsker(MessageCompleter):
    """A pinned asker: asks ``questions`` in turn, then guesses the first candidate it has not
    guessed (reads only its own conversation)."""

    def __init__(self, questions: Sequence[str] = ("Is it an animal?", "Is it man-made?")) -> None:
        self.questions = list(questions)

    async def __call__(self, messages: list[Message]) -> Message:
        asked = sum(m["role"] == "assistant" for m in messages)
        if asked < len(self.questions):
            return {"role": "assistant", "content": self.questions[asked]}
        opening = get_text_content(messages[0])
        words = opening.split("these words: ", 1)[1].split(".", 1)[0].split(", ")
        return {"role": "assistant", "content": f"Guess: {words[(asked - len(self.questions)) % len(words)]}"}


def _new_game(config: SeatedConfig, kb: KnowledgeBase, rng: random.Random) -> TwentyQuestionsGame:
    candidates = rng.sample(sorted(kb.table), config.candidates)
    return TwentyQuestionsGame(rng.choice(candidates), candidates, config, kb)


def seated_builder(
    renderer: Renderer,
    *,
    asker: Seat | None = None,
    answerer: Seat | None = None,
    games: int = 8,
    seed: int = 0,
    config: SeatedConfig | None = None,
    kb: KnowledgeBase | None = None,
) -> SeatedGroupBuilder:
    """``games`` games (secrets and candidates drawn per game from ``seed``); each seat is the
    policy (trained) unless given (``asker=Seat.pinned("scripted", ScriptedAsker())`` trains the
    answerer alone)."""
    config = config or SeatedConfig()
    kb = kb or default_kb()
    return SeatedGroupBuilder(
        make_game=partial(_new_game, config, kb),
        renderer=renderer,
        seats=(asker or Seat.policy(), answerer or Seat.policy()),
        games=games,
        seed=seed,
        loop=LoopConfig(max_moves=4 * config.max_questions),
        tags=("twenty_questions_seated",),
    )
