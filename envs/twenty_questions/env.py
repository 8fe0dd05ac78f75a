"""Twenty Questions on the token-in/token-out :class:`envs.core.ChatEnv`.

The player (the policy) asks yes/no questions or answers ``Guess: <word>``; an
:class:`~envs.twenty_questions.answerers.Answerer` replies. Every player turn (question, guess or
format violation) uses one of ``max_questions`` turns, as in the classic game.

Rewards (all configurable in :class:`TwentyQuestionsConfig`), given on the step they happen:

- right guess: ``win_reward`` plus ``efficiency_bonus * (max_questions - turns_before) /
  max_questions``, where ``turns_before`` is the number of turns before the winning guess (a win
  on the first turn earns the whole bonus); the episode ends (``stop/completed``).
- wrong guess: ``wrong_guess_reward``; the player is told "No, it is not <word>." and plays on,
  unless ``max_guesses`` wrong guesses have been made (then the episode ends, ``stop/completed``).
- a question: ``question_reward`` (0 by default; negative makes asking cost something), and the answerer's
  reply.
- a turn that is neither one question nor one guess: ``-format_penalty``, and the player is
  reminded of the format; the episode goes on.
- a faulty action (empty, invalid UTF-8, unparseable; truncated by ``max_tokens`` unless
  ``play_truncated``, the default, plays it as written): ``-fault_penalty`` and the episode ends
  (``stop/max_tokens`` or ``stop/parse_error``), see :class:`envs.core.Fault`.
- running out of turns: nothing more; ``stop/max_turns``.

Guess detection (:func:`parse_guess`): anywhere in the message, case-insensitive, articles and a
plural ``s`` tolerated, synonyms of KB words accepted; the first guess counts, and a line naming
several words counts as its first.

Episode metrics (:class:`Metric`, one value per episode) are returned by
:meth:`TwentyQuestionsEnv.episode_metrics` and reported through
:meth:`envs.twenty_questions.builders.TwentyQuestionsGroupBuilder.compute_group_rewards`, so faulted and overflowing episodes
are counted too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from tinker_cookbook.renderers import Message, Renderer, get_text_content
from tinker_cookbook.rl.types import (
    Metrics,
    StopReason,
)
from tinker_cookbook.utils import logtree

from envs.core import ChatEnv, EnvLimits, Fault, FaultPolicy, Reply, TurnEnd
from envs.twenty_questions._kb import default_kb
from envs.twenty_questions._text import TurnKind, classify_turn, same_word, stem
from envs.twenty_questions.answerers import WRONG_GUESS, Answer, Answerer
from envs.twenty_questions.config import CANDIDATES_SENTENCE, TwentyQuestionsConfig

FORMAT_REMINDER = "Please ask one yes/no question, or answer `Guess: <word>`."
"""The reply to a turn that is neither one question nor one guess."""


class Metric(StrEnum):
    """Per-episode metrics of Twenty Questions (keys of :meth:`TwentyQuestionsEnv.episode_metrics`)."""

    WIN = "twenty_questions/win"
    """1.0 when the secret word was guessed, else 0.0."""
    TURNS = "twenty_questions/turns"
    """Player turns taken (questions, guesses, format violations and faults)."""
    QUESTIONS = "twenty_questions/questions"
    """Questions asked."""
    QUESTION_FRACTION = "twenty_questions/question_fraction"
    """Questions / turns (0 when no turn was taken)."""
    TURNS_BEFORE_FINAL_GUESS = "twenty_questions/turns_before_final_guess"
    """Turns before the final guess: all turns but the last when the last one was a guess, else all turns."""
    GUESSES = "twenty_questions/guesses"
    """Guesses made (right or wrong)."""
    WRONG_GUESSES = "twenty_questions/wrong_guesses"
    """Wrong guesses."""
    FORMAT_VIOLATIONS = "twenty_questions/format_violations"
    """Turns that were neither one question nor one guess."""
    FAULTS = "twenty_questions/faults"
    """Faulty actions (truncated, empty, invalid UTF-8, unparseable), see ``envs.core.Fault``."""
    ANSWERS_YES = "twenty_questions/answers_yes"
    """Questions answered yes."""
    ANSWERS_NO = "twenty_questions/answers_no"
    """Questions answered no."""
    ANSWERS_UNKNOWN = "twenty_questions/answers_unknown"
    """Questions answered "I can't answer that" (not understood, or the LLM fallback)."""
    ANSWERER_FALLBACKS = "twenty_questions/answerer_fallbacks"
    """LLM answerer replies that were neither yes nor no (the fallback answer was used)."""


def player_prompt(config: TwentyQuestionsConfig, candidates: Sequence[str] = ()) -> str:
    """The first user message of a game."""
    told = CANDIDATES_SENTENCE.format(words=", ".join(candidates)) if candidates else ""
    return config.prompt.format(candidates=told, max_questions=config.max_questions)


@dataclass
class EpisodeStats:
    """Counters of one episode (mutable on purpose: one per game, updated turn by turn)."""

    turns: int = 0
    """Player turns taken (including faulty ones)."""
    questions: int = 0
    """Questions asked."""
    guesses: int = 0
    """Guesses made."""
    wrong_guesses: int = 0
    """Wrong guesses made."""
    format_violations: int = 0
    """Turns that were neither one question nor one guess."""
    faults: int = 0
    """Faulty actions (see ``envs.core.Fault``)."""
    answers: dict[Answer, int] = field(default_factory=lambda: dict.fromkeys(Answer, 0))
    """Questions answered, by answer."""
    fallbacks: int = 0
    """LLM replies that were neither yes nor no."""
    won: bool = False
    """Whether the secret was guessed."""
    last_was_guess: bool = False
    """Whether the latest turn was a guess (right or wrong)."""
    stop_reason: StopReason | None = None
    """Why the episode ended (None while it runs)."""

    def metrics(self) -> Metrics:
        """The episode's :class:`Metric` values."""
        return {
            Metric.WIN: float(self.won),
            Metric.TURNS: float(self.turns),
            Metric.QUESTIONS: float(self.questions),
            Metric.QUESTION_FRACTION: self.questions / self.turns if self.turns else 0.0,
            Metric.TURNS_BEFORE_FINAL_GUESS: float(self.turns - 1 if self.last_was_guess else self.turns),
            Metric.GUESSES: float(self.guesses),
            Metric.WRONG_GUESSES: float(self.wrong_guesses),
            Metric.FORMAT_VIOLATIONS: float(self.format_violations),
            Metric.FAULTS: float(self.faults),
            Metric.ANSWERS_YES: float(self.answers[Answer.YES]),
            Metric.ANSWERS_NO: float(self.answers[Answer.NO]),
            Metric.ANSWERS_UNKNOWN: float(self.answers[Answer.UNKNOWN]),
            Metric.ANSWERER_FALLBACKS: float(self.fallbacks),
        }


def is_correct_guess(guess: str, word: str) -> bool:
    """A guess names the secret: same word up to case / plural, or a KB synonym of it."""
    if same_word(guess, word):
        return True
    kb = default_kb()
    return kb.canonical(guess) == word or kb.canonical(stem(guess)) == word


class TwentyQuestionsGame:
    """The game's rules without tokens: feed player messages, get replies, rewards and stats.

    Used by :class:`TwentyQuestionsEnv` and by the scripted players (SFT transcripts).
    """

    def __init__(
        self,
        word: str,
        answerer: Answerer,
        config: TwentyQuestionsConfig | None = None,
        candidates: Sequence[str] = (),
    ):
        if not word or not word.strip():
            raise ValueError("the secret word must be a non-empty string")
        self.word = word.strip().lower()
        if candidates and self.word not in candidates:
            raise ValueError(f"the secret word {self.word!r} is not among the candidates {list(candidates)}")
        self.answerer = answerer
        self.config = config or TwentyQuestionsConfig()
        self.candidates = tuple(candidates)
        self.stats = EpisodeStats()

    def initial_messages(self) -> list[Message]:
        """The conversation before the player's first turn."""
        return [{"role": "user", "content": player_prompt(self.config, self.candidates)}]

    async def play(self, text: str) -> Reply:
        """Apply one player message: the game's :class:`~envs.Reply` (its ``messages`` the reply
        shown to the player next, none once the game is over; ``logs['kind']`` what the message was)."""
        cfg, stats = self.config, self.stats
        stats.turns += 1
        turns_before = stats.turns - 1
        parsed = classify_turn(text)
        stats.last_was_guess = parsed.kind is TurnKind.GUESS
        logs: dict[str, str | int | float] = {"turn": stats.turns, "kind": str(parsed.kind)}
        reward = 0.0
        if parsed.kind is TurnKind.GUESS:
            stats.guesses += 1
            logs["guess"] = parsed.text
            if is_correct_guess(parsed.text, self.word):
                stats.won = True
                bonus = cfg.efficiency_bonus * (cfg.max_questions - turns_before) / cfg.max_questions
                return Reply(reward=cfg.win_reward + bonus, done=True, logs=logs)
            stats.wrong_guesses += 1
            reward = cfg.wrong_guess_reward
            if cfg.max_guesses is not None and stats.wrong_guesses >= cfg.max_guesses:
                return Reply(reward=reward, done=True, logs=logs)
            reply = WRONG_GUESS.format(guess=parsed.text)
        elif parsed.kind is TurnKind.QUESTION:
            stats.questions += 1
            result = await self.answerer(self.word, parsed.text)
            stats.answers[result.answer] += 1
            stats.fallbacks += int(result.fallback)
            logs.update(question=parsed.text, answer=str(result.answer), answerer_raw=result.raw)
            reward = cfg.question_reward
            reply = result.text
        else:
            stats.format_violations += 1
            reward = -cfg.format_penalty
            reply = FORMAT_REMINDER
        if stats.turns >= cfg.max_questions:
            return Reply(reward=reward, done=True, stop_reason=StopReason.MAX_TURNS, logs=logs)
        return Reply(messages=[{"role": "user", "content": reply}], reward=reward, logs=logs)


class TwentyQuestionsEnv(ChatEnv):
    """One game of Twenty Questions for one player (single-use, like every cookbook ``Env``).

    Args:
        renderer: the player's renderer (token-in/token-out when it has the extension property).
        word: the secret word.
        answerer: who answers questions (:class:`KBAnswerer`, :class:`LLMAnswerer`...).
        config: rules, rewards, difficulty.
        candidates: the candidate list told to the player (must contain ``word``; empty: none).
    """

    def __init__(
        self,
        renderer: Renderer,
        word: str,
        answerer: Answerer,
        config: TwentyQuestionsConfig | None = None,
        candidates: Sequence[str] = (),
    ):
        config = config or TwentyQuestionsConfig()
        super().__init__(
            renderer,
            limits=EnvLimits(
                max_turns=config.max_questions, max_trajectory_tokens=config.max_trajectory_tokens
            ),
            faults={
                fault: FaultPolicy(reward=-config.fault_penalty, end_episode=True)
                if not (fault is Fault.TRUNCATED and config.play_truncated)
                else FaultPolicy(reward=-config.truncation_penalty, end_episode=False)
                for fault in Fault
            },
        )
        self.game = TwentyQuestionsGame(word, answerer, config, candidates)

    @property
    def word(self) -> str:
        """The secret word."""
        return self.game.word

    @property
    def stats(self) -> EpisodeStats:
        """The episode's counters so far."""
        return self.game.stats

    def initial_messages(self) -> list[Message]:
        return self.game.initial_messages()

    async def on_message(self, message: Message) -> Reply:
        text = get_text_content(message)
        step = await self.game.play(text)
        # transcripts in the cookbook's HTML logs (a no-op outside a logtree scope)
        logtree.log_text(f"Turn {self.game.stats.turns} ({step.logs['kind']}) - Player: {text}")
        for reply in step.messages:
            logtree.log_text(f"Turn {self.game.stats.turns} - Reply: {get_text_content(reply)}")
        if step.done:
            logtree.log_text(
                f"Game over - secret: {self.game.word}, won: {self.game.stats.won}, reason: {step.stop_reason}"
            )
        return replace(step, logs={"secret": self.game.word, **step.logs})

    def on_turn_end(self, turn: TurnEnd) -> None:
        """Keep the game's counters in step with the base's turns: a faulty turn the game did
        not play still takes one of the ``max_questions`` turns."""
        stats = self.game.stats
        if turn.fault is not None:
            stats.faults += 1
            if not turn.played:
                stats.turns += 1
                stats.last_was_guess = False
        if turn.stop_reason is not None:
            stats.stop_reason = turn.stop_reason

    def episode_metrics(self) -> Metrics:
        """The episode's :class:`Metric` values (complete however the episode ended)."""
        return self.game.stats.metrics()
