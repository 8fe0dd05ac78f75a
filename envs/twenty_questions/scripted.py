"""Scripted players: for tests, baselines, and SFT warm starts.

- :class:`KBOptimalPlayer`: a good player against the knowledge base. Stateless (a
  ``MessageCompleter``): from the conversation so far it keeps the words consistent with every
  answer, asks the attribute question that splits them most evenly, and guesses when one word
  is left (or no question splits them, or one turn is left).
- :class:`HalvingPlayer`: binary search over the listed candidates with set questions ("Is it
  cat, dog, apple or car?", which the KB answerer understands as a disjunction): it halves the
  words still possible each turn and guesses when two are left or one turn is. Its moves only
  copy words from the prompt, so a small model learns them from a few transcripts, and with
  8 candidates in 4 turns it always wins where enumeration wins half the games.
- :class:`FixedPlayer`: replies with fixed texts in turn (the last one repeated): always-correct,
  always-wrong, garbage players for tests.
- :func:`play_game` / :func:`scripted_game`: a whole game as messages (no tokens), e.g. for SFT.
- :func:`play_env`: drive a token-level :class:`TwentyQuestionsEnv` with a message-level player.
- :func:`text_to_action`: the tokens a model would sample for a reply (content + stop token).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from tinker_cookbook.completers import MessageCompleter
from tinker_cookbook.renderers import Message, Renderer, get_text_content
from tinker_cookbook.rl.types import Action, Metrics, StopReason

from envs.twenty_questions._kb import QUESTIONS, Attribute, KnowledgeBase, default_kb
from envs.twenty_questions._text import TurnKind, classify_turn
from envs.twenty_questions.answerers import ANSWER_TEXT, Answer, Answerer, KBAnswerer, understand
from envs.twenty_questions.env import (
    WRONG_GUESS,
    TwentyQuestionsConfig,
    TwentyQuestionsEnv,
    TwentyQuestionsGame,
)


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

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ValueError("HalvingPlayer needs the candidate list")

    def next_text(self, messages: Sequence[Message]) -> str:
        """The player's next message."""
        remaining = consistent_words(self.candidates, messages, self.kb) or list(self.candidates)
        turns_left = self.max_questions - sum(1 for m in messages if m["role"] == "assistant")
        if len(remaining) <= 2 or turns_left <= 1:
            return f"Guess: {remaining[0]}"
        return set_question(remaining[: len(remaining) // 2])

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


@dataclass(frozen=True)
class GameRecord:
    """A played game: the conversation, its rewards and its metrics."""

    messages: list[Message]
    """The whole conversation (prompt, then alternating player / answerer turns)."""
    rewards: list[float]
    """Reward of each player turn."""
    won: bool
    """Whether the secret was guessed."""
    stop_reason: StopReason
    """Why the game ended."""
    metrics: Metrics
    """The episode metrics (``Metric`` keys)."""

    @property
    def total_reward(self) -> float:
        """Sum of the turn rewards."""
        return sum(self.rewards)


async def play_game(player: MessageCompleter, game: TwentyQuestionsGame) -> GameRecord:
    """Play a whole game at the message level (no tokens, no renderer)."""
    messages = game.initial_messages()
    rewards: list[float] = []
    while True:
        reply = await player(list(messages))
        messages.append({"role": "assistant", "content": get_text_content(reply)})
        step = await game.play(get_text_content(reply))
        rewards.append(step.reward)
        if step.done:
            game.stats.stop_reason = step.stop_reason
            return GameRecord(messages, rewards, game.stats.won, step.stop_reason, game.stats.metrics())
        assert step.reply is not None
        messages.append({"role": "user", "content": step.reply})


def scripted_game(
    word: str,
    candidates: Sequence[str] = (),
    *,
    config: TwentyQuestionsConfig | None = None,
    answerer: Answerer | None = None,
    kb: KnowledgeBase | None = None,
) -> GameRecord:
    """A good transcript for ``word``: :class:`KBOptimalPlayer` against (by default) the KB answerer.

    ``config.candidates`` is ignored here: pass the list to tell the player (and to restrict the
    player's reasoning). Synchronous; from async code use :func:`play_game`.
    """
    config = config or TwentyQuestionsConfig()
    kb = kb or default_kb()
    guess_at = 2 if config.max_guesses is None or config.max_guesses >= 2 else 1
    player = KBOptimalPlayer(tuple(candidates), max_questions=config.max_questions, kb=kb, guess_at=guess_at)
    game = TwentyQuestionsGame(word, answerer or KBAnswerer(kb), config, candidates)
    return asyncio.run(play_game(player, game))


def text_to_action(renderer: Renderer, text: str) -> Action:
    """The tokens of an assistant reply as sampled: the content, then the first stop token."""
    stop = renderer.get_stop_sequences()
    content = renderer.tokenizer.encode(text, add_special_tokens=False)
    if stop and isinstance(stop[0], int):
        return [*content, stop[0]]
    suffix = str(stop[0]) if stop else ""
    return renderer.tokenizer.encode(text + suffix, add_special_tokens=False)


async def play_env(env: TwentyQuestionsEnv, player: MessageCompleter) -> GameRecord:
    """Run a token-level env to the end with a message-level player (replies become tokens)."""
    start = await env.initial_observation()
    rewards: list[float] = []
    if isinstance(start, tuple):
        while True:
            reply = await player(list(env.messages))
            result = await env.step(
                text_to_action(env.renderer, get_text_content(reply)), extra={"stop_reason": "stop"}
            )
            rewards.append(result.reward)
            if result.episode_done:
                break
    stats = env.stats
    return GameRecord(
        list(env.messages),
        rewards,
        stats.won,
        stats.stop_reason or StopReason.MAX_TOKENS,
        env.episode_metrics(),
    )
