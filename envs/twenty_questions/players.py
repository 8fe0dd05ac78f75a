"""Scripted players of Twenty Questions (``MessageCompleter`` s): for tests, baselines and warm starts.

- :class:`KBOptimalPlayer`: a good player against the knowledge base. Stateless: from the
  conversation so far it keeps the words consistent with every answer, asks the attribute
  question that splits them most evenly, and guesses when one word is left (or no question
  splits them, or one turn is left).
- :class:`HalvingPlayer`: binary search over the listed candidates with set questions ("Is it
  cat, dog, apple or car?", which the KB answerer understands as a disjunction): it halves the
  words still possible each turn and guesses when two are left or one turn is. Its moves only
  copy words from the prompt, so a small model learns them from a few transcripts, and with
  8 candidates in 4 turns it always wins where enumeration wins half the games.
- :class:`FixedPlayer`: replies with fixed texts in turn (the last one repeated): always-correct,
  always-wrong, garbage players for tests.
- :func:`consistent_words` / :func:`set_question`: the reasoning and the question they share.

Players read only the conversation (no env, no game), so env builders can script warm-start
episodes with them (``TwentyQuestionsDatasetBuilder.scripted_episodes``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, get_text_content

from envs.twenty_questions._kb import QUESTIONS, Attribute, KnowledgeBase, default_kb
from envs.twenty_questions._text import TurnKind, classify_turn
from envs.twenty_questions.answerers import ANSWER_TEXT, WRONG_GUESS, Answer, understand


def _reply_answer(text: str) -> Answer | None:
    stripped = text.strip()
    for answer, shown in ANSWER_TEXT.items():
        if stripped == shown:
            return answer
    return None


def consistent_words(words: Sequence[str], messages: Sequence[Message], kb: KnowledgeBase) -> list[str]:
    """The ``words`` (in order) consistent with the answers of the conversation ``messages``.

    A wrong-guess reply removes the guessed word; a yes/no reply to a question removes the words
    the KB evaluates the other way (words outside the KB, and questions it cannot evaluate for a
    word, remove nothing).
    """
    remaining = list(words)
    history = [m for m in messages if m["role"] in ("assistant", "user")]
    for i, message in enumerate(history):
        if message["role"] != "assistant" or i + 1 >= len(history):
            continue
        turn = classify_turn(get_text_content(message))
        reply = get_text_content(history[i + 1])
        if turn.kind is TurnKind.GUESS and reply == WRONG_GUESS.format(guess=turn.text):
            remaining = [w for w in remaining if w != turn.text]
        elif turn.kind is TurnKind.QUESTION:
            answer = _reply_answer(reply)
            if answer in (Answer.YES, Answer.NO):
                understanding = understand(turn.text, kb)
                remaining = [
                    w
                    for w in remaining
                    if w not in kb.table or understanding.evaluate(kb, w) in (answer, Answer.UNKNOWN)
                ]
    return remaining


@dataclass(frozen=True)
class KBOptimalPlayer(MessageCompleter):
    """Asks the most discriminating attribute questions, then guesses (see the module docstring)."""

    candidates: tuple[str, ...] = ()
    """The words the secret may be (empty: every KB word)."""
    max_questions: int = 20
    """Turns allowed; the player guesses on the last one at the latest."""
    kb: KnowledgeBase = field(default_factory=default_kb)
    """The knowledge base the player reasons with."""
    guess_at: int = 2
    """Guess once this many words or fewer remain (2 saves turns on average; use 1 when a wrong
    guess loses the game)."""

    def remaining(self, messages: Sequence[Message]) -> list[str]:
        """The candidates consistent with the conversation so far (in candidate order)."""
        return consistent_words(self.candidates or self.kb.words, messages, self.kb)

    def next_text(self, messages: Sequence[Message]) -> str:
        """The player's next message."""
        remaining = self.remaining(messages)
        turns_used = sum(1 for m in messages if m["role"] == "assistant")
        if not remaining:  # inconsistent answers (e.g. a noisy LLM answerer): guess anything left
            guessed = {classify_turn(get_text_content(m)).text for m in messages if m["role"] == "assistant"}
            remaining = [w for w in (self.candidates or self.kb.words) if w not in guessed] or [
                (self.candidates or self.kb.words)[0]
            ]
        attribute = self.best_question(remaining)
        if len(remaining) <= self.guess_at or attribute is None or turns_used >= self.max_questions - 1:
            return f"Guess: {remaining[0]}"
        return QUESTIONS[attribute]

    def best_question(self, remaining: Sequence[str]) -> Attribute | None:
        """The attribute that splits ``remaining`` most evenly (None when none splits it)."""
        known = [w for w in remaining if w in self.kb.table]
        best: tuple[int, Attribute] | None = None
        for attribute in Attribute:
            yes = sum(self.kb.has(w, attribute) for w in known)
            if 0 < yes < len(known):
                score = abs(2 * yes - len(known))
                if best is None or score < best[0]:
                    best = (score, attribute)
        return best[1] if best else None

    async def __call__(self, messages: list[Message]) -> Message:
        return {"role": "assistant", "content": self.next_text(messages)}


def set_question(words: Sequence[str]) -> str:
    """A yes/no question on membership: "Is it a?", "Is it a or b?", "Is it a, b or c?"."""
    if not words:
        raise ValueError("set_question needs at least one word")
    if len(words) == 1:
        return f"Is it {words[0]}?"
    return f"Is it {', '.join(words[:-1])} or {words[-1]}?"


@dataclass(frozen=True)
class HalvingPlayer(MessageCompleter):
    """Binary search over the candidates with set questions (see the module docstring).

    Which words are still possible comes from the conversation through the same reading of the
    answers as :class:`KBOptimalPlayer` (:func:`consistent_words`; so a word the KB answerer reads as an attribute, e.g.
    "water", stays consistent with the answers it gave).
    """

    candidates: tuple[str, ...]
    """The listed words (the order of the prompt; the first half is asked about first)."""
    max_questions: int = 20
    """Turns allowed; the player guesses on the last one at the latest."""
    kb: KnowledgeBase = field(default_factory=default_kb)
    """The knowledge base the answers are read with."""
    split_noise: float = 0.0
    """Probability that a question names a random number of the words still possible (1 to all
    but one, uniformly) instead of half of them: a weaker player for warm starts that leave RL
    something to learn (1.0: every split is random)."""
    exact_questions: int = 0
    """The first this many questions always halve; ``split_noise`` draws on later ones only (so a
    warm start can teach the first split exactly and leave RL the later ones)."""
    seed: int = 0
    """Seed of the random splits (the draw of turn ``t`` depends on ``seed`` and ``t`` only, so
    the player stays a function of the conversation)."""

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ValueError("HalvingPlayer needs the candidate list")
        if not 0.0 <= self.split_noise <= 1.0:
            raise ValueError(f"split_noise must be in [0, 1], got {self.split_noise}")
        if self.exact_questions < 0:
            raise ValueError(f"exact_questions must be >= 0, got {self.exact_questions}")

    def next_text(self, messages: Sequence[Message]) -> str:
        """The player's next message."""
        remaining = consistent_words(self.candidates, messages, self.kb) or list(self.candidates)
        turns_used = sum(1 for m in messages if m["role"] == "assistant")
        if len(remaining) <= 2 or self.max_questions - turns_used <= 1:
            return f"Guess: {remaining[0]}"
        named = len(remaining) // 2
        if self.split_noise and turns_used >= self.exact_questions:
            rng = random.Random(f"halving/{self.seed}/{turns_used}")
            if rng.random() < self.split_noise:
                named = rng.randint(1, len(remaining) - 1)
        return set_question(remaining[:named])

    async def __call__(self, messages: list[Message]) -> Message:
        return {"role": "assistant", "content": self.next_text(messages)}


@dataclass(frozen=True)
class FixedPlayer(MessageCompleter):
    """Replies ``texts[0]``, ``texts[1]``, ... by turn; the last text repeats."""

    texts: tuple[str, ...]
    """The replies, in turn order."""

    def __post_init__(self) -> None:
        if not self.texts:
            raise ValueError("FixedPlayer needs at least one text")

    async def __call__(self, messages: list[Message]) -> Message:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return {"role": "assistant", "content": self.texts[min(turn, len(self.texts) - 1)]}
