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
:meth:`TwentyQuestionsGroupBuilder.compute_group_rewards`, so faulted and overflowing episodes
are counted too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import chz
from tinker_cookbook.completers import TokenCompleter
from tinker_cookbook.renderers import Message, Renderer, get_text_content
from tinker_cookbook.rl.types import (
    STOP_METRIC_PREFIX,
    Action,
    ActionExtra,
    Env,
    EnvGroupBuilder,
    Metrics,
    RLDatasetBuilder,
    StepResult,
    StopReason,
    Trajectory,
)
from tinker_cookbook.utils import logtree

from backend.model import SMOLLM2
from envs.core import METRIC_FAULT_PREFIX, ChatEnv, EnvLimits, Fault, FaultPolicy, Reply
from envs.datasets import GroupDataset
from envs.twenty_questions._kb import default_kb
from envs.twenty_questions._text import TurnKind, classify_turn, same_word, stem
from envs.twenty_questions.answerers import WRONG_GUESS, Answer, Answerer, KBAnswerer, LLMAnswerer
from envs.twenty_questions.config import CANDIDATES_SENTENCE, TwentyQuestionsConfig
from envs.twenty_questions.words import pick_candidates, split_words
from renderers_ext import load_renderer, recommended_renderer_name

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


@dataclass(frozen=True)
class GameStep:
    """The outcome of one player message, independent of tokens."""

    kind: TurnKind
    """What the message was."""
    reply: str | None
    """The text shown to the player next (None when the game is over)."""
    reward: float
    """Reward of this turn."""
    done: bool
    """Whether the game is over."""
    stop_reason: StopReason = StopReason.COMPLETED
    """Why the game ended, when ``done``."""
    logs: dict[str, str | int | float] = field(default_factory=dict)
    """Diagnostics (question, guess, answer, answerer's raw reply)."""


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

    async def play(self, text: str) -> GameStep:
        """Apply one player message."""
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
                return GameStep(parsed.kind, None, cfg.win_reward + bonus, True, StopReason.COMPLETED, logs)
            stats.wrong_guesses += 1
            reward = cfg.wrong_guess_reward
            if cfg.max_guesses is not None and stats.wrong_guesses >= cfg.max_guesses:
                return GameStep(parsed.kind, None, reward, True, StopReason.COMPLETED, logs)
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
            return GameStep(parsed.kind, reply, reward, True, StopReason.MAX_TURNS, logs)
        return GameStep(parsed.kind, reply, reward, False, StopReason.COMPLETED, logs)


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
        self._fault_played = False

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
        logtree.log_text(f"Turn {self.game.stats.turns} ({step.kind}) - Player: {text}")
        if step.reply is not None:
            logtree.log_text(f"Turn {self.game.stats.turns} - Reply: {step.reply}")
        if step.done:
            logtree.log_text(
                f"Game over - secret: {self.game.word}, won: {self.game.stats.won}, reason: {step.stop_reason}"
            )
        messages: list[Message] = (
            [] if step.done or step.reply is None else [{"role": "user", "content": step.reply}]
        )
        return Reply(
            messages=messages,
            reward=step.reward,
            done=step.done,
            stop_reason=step.stop_reason,
            logs={"secret": self.game.word, **step.logs},
        )

    async def on_fault(self, fault: Fault, message: Message | None) -> Reply:
        self._fault_played = message is not None  # the game counts the turn it plays
        return await super().on_fault(fault, message)

    async def step(self, action: Action, *, extra: ActionExtra | None = None) -> StepResult:
        self._fault_played = False
        result = await super().step(action, extra=extra)
        if any(k.startswith(METRIC_FAULT_PREFIX) for k in result.metrics):
            self.game.stats.faults += 1
            if not self._fault_played:
                self.game.stats.turns += 1
                self.game.stats.last_was_guess = False
        if result.episode_done:
            for key in result.metrics:
                if key.startswith(STOP_METRIC_PREFIX):
                    self.game.stats.stop_reason = StopReason(key[len(STOP_METRIC_PREFIX) :])
        return result

    def episode_metrics(self) -> Metrics:
        """The episode's :class:`Metric` values (complete however the episode ended)."""
        return self.game.stats.metrics()


@dataclass(frozen=True)
class TwentyQuestionsGroupBuilder(EnvGroupBuilder):
    """A group of ``group_size`` games on the same secret word and candidate list (picklable)."""

    word: str
    """The secret word."""
    group_size: int
    """Games in the group (the GRPO group size)."""
    answerer: Answerer
    """Who answers (must pickle: :class:`KBAnswerer` does)."""
    config: TwentyQuestionsConfig = field(default_factory=TwentyQuestionsConfig)
    """Rules, rewards, difficulty."""
    candidates: tuple[str, ...] = ()
    """The candidate list told to the player (empty: none)."""
    model_name_for_tokenizer: str = SMOLLM2
    """The player's model, for its tokenizer."""
    renderer_name: str | None = None
    """The player's renderer, by name (None: the model's recommended one); renderers are created
    in :meth:`make_envs`."""
    split: str = "train"
    """Word split, used as a logging tag."""

    async def make_envs(self) -> Sequence[Env]:
        renderer = load_renderer(self.renderer_name, self.model_name_for_tokenizer)
        return [
            TwentyQuestionsEnv(renderer, self.word, self.answerer, self.config, self.candidates)
            for _ in range(self.group_size)
        ]

    async def compute_group_rewards(
        self, trajectory_group: list[Trajectory], env_group: Sequence[Env]
    ) -> list[tuple[float, Metrics]]:
        """No group reward; reports each episode's :class:`Metric` values."""
        return [
            (0.0, env.episode_metrics() if isinstance(env, TwentyQuestionsEnv) else {}) for env in env_group
        ]

    def logging_tags(self) -> list[str]:
        return ["twenty_questions", f"twenty_questions_{self.split}"]


class TwentyQuestionsDataset(GroupDataset):
    """Batches of :class:`TwentyQuestionsGroupBuilder`, seeded (a :class:`~envs.datasets.GroupDataset`:
    group ``k`` is :meth:`item` ``k``).

    Words are visited epoch by epoch, each epoch in a seeded order (or in the given order when
    ``shuffle`` is False); candidate lists are drawn from ``candidate_pool`` with a seed that
    depends on the seed and the item's position, so resuming at batch i reproduces it exactly.
    """

    def __init__(
        self,
        words: Sequence[str],
        *,
        batch_size: int,
        group_size: int,
        answerer: Answerer,
        config: TwentyQuestionsConfig | None = None,
        model_name_for_tokenizer: str = SMOLLM2,
        renderer_name: str | None = None,
        seed: int = 0,
        num_batches: int | None = None,
        shuffle: bool = True,
        candidate_pool: Sequence[str] | None = None,
        split: str = "train",
    ):
        if not words:
            raise ValueError("a Twenty Questions dataset needs at least one word")
        if batch_size < 1 or group_size < 1:
            raise ValueError(f"batch_size and group_size must be >= 1, got {batch_size} and {group_size}")
        self.words = tuple(words)
        self.group_size = group_size
        self.answerer = answerer
        self.config = config or TwentyQuestionsConfig()
        self.model_name_for_tokenizer = model_name_for_tokenizer
        self.renderer_name = renderer_name
        self.seed = seed
        self.shuffle = shuffle
        self.candidate_pool = tuple(candidate_pool) if candidate_pool is not None else self.words
        self.split = split
        if self.config.candidates > len(set(self.candidate_pool)):
            raise ValueError(
                f"candidates={self.config.candidates} exceeds the {len(set(self.candidate_pool))} words of the candidate pool"
            )
        self._orders: dict[int, tuple[str, ...]] = {}
        self.num_batches = num_batches if num_batches is not None else max(1, len(self.words) // batch_size)
        if self.num_batches < 1:
            raise ValueError(f"num_batches must be >= 1, got {self.num_batches}")
        super().__init__(batch_size, self.num_batches * batch_size)

    def _epoch_order(self, epoch: int) -> tuple[str, ...]:
        if epoch not in self._orders:
            order = list(self.words)
            if self.shuffle:
                random.Random(f"twenty_questions/{self.seed}/epoch/{epoch}").shuffle(order)
            if len(self._orders) >= 4:
                self._orders.clear()
            self._orders[epoch] = tuple(order)
        return self._orders[epoch]

    def item(self, flat_index: int) -> tuple[str, tuple[str, ...]]:
        """The secret word and candidate list of the ``flat_index``-th group of the dataset."""
        epoch, position = divmod(flat_index, len(self.words))
        word = self._epoch_order(epoch)[position]
        candidates = pick_candidates(
            word, self.config.candidates, self.candidate_pool, seed=f"{self.seed}/{flat_index}"
        )
        return word, candidates

    def group(self, index: int) -> TwentyQuestionsGroupBuilder:
        """The group of :meth:`item` ``index``."""
        word, candidates = self.item(index)
        return TwentyQuestionsGroupBuilder(
            word=word,
            group_size=self.group_size,
            answerer=self.answerer,
            config=self.config,
            candidates=candidates,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
            split=self.split,
        )


DEFAULT_LLM_ANSWERER = "Qwen/Qwen3.5-9B"
"""The LLM answerer's model on Tinker when none is given (the cookbook recipe's)."""


def answerer_renderer_name(model_name: str) -> str:
    """A non-thinking renderer for an LLM answerer (a few tokens must suffice for yes / no)."""
    if model_name.startswith(("Qwen/Qwen3.5", "Qwen/Qwen3.6")):
        return "qwen3_5_disable_thinking"
    if model_name.startswith("Qwen/Qwen3"):
        return "qwen3_disable_thinking"
    return recommended_renderer_name(model_name)


class AnswererKind(StrEnum):
    """Which answerer a dataset builder creates."""

    KB = "kb"
    """:class:`KBAnswerer`: deterministic, from the knowledge base (default; local backend)."""
    LLM = "llm"
    """:class:`LLMAnswerer` over a sampling client (local or Tinker) of ``answerer_base_model``."""


@chz.chz
class TwentyQuestionsDatasetBuilder(RLDatasetBuilder):
    """Train (train split) and test (held-out split) datasets; runs in tinker-cookbook's ``rl.train``."""

    batch_size: int = 8
    """Groups (secret words) per batch."""
    group_size: int = 4
    """Games per group."""
    model_name_for_tokenizer: str = SMOLLM2
    """The player's model (for its tokenizer)."""
    renderer_name: str | None = None
    """The player's renderer (None: the model's recommended one)."""
    env: TwentyQuestionsConfig = chz.field(default_factory=TwentyQuestionsConfig)
    """Rules, rewards and difficulty."""
    seed: int = 0
    """Seed of the training split's word order and candidate lists."""
    test_seed: int = 0
    """Seed of the held-out split's word order and candidate lists, apart from :attr:`seed`, so
    that runs with any seed are evaluated on the same games."""
    num_epochs: int = 1
    """Passes over the training words (sets the number of training batches)."""
    num_batches: int | None = None
    """Training batches (overrides ``num_epochs`` when set)."""
    test_group_size: int = 4
    """Games per test word."""
    test_batch_size: int | None = None
    """Test words per test batch (None: all test words in one batch). Test words come in one
    fixed seeded order, so the first batch is a representative sample."""
    answerer: AnswererKind = AnswererKind.KB
    """Which answerer: ``kb`` (default) or ``llm``."""
    answerer_backend: str = "auto"
    """Where the LLM answerer runs: ``local`` (embedded model), ``tinker``, or ``auto`` (Tinker
    when ``TINKER_API_KEY`` is set, else local); see ``backend.make_service_client``."""
    answerer_base_model: str | None = None
    """The LLM answerer's model (None: SmolLM2 locally, ``Qwen/Qwen3.5-9B`` on Tinker)."""
    answerer_renderer_name: str | None = None
    """The LLM answerer's renderer (None: a non-thinking one for the model)."""
    answerer_max_tokens: int = 5
    """Sampling budget of the LLM answerer."""
    answerer_temperature: float = 0.0
    """Sampling temperature of the LLM answerer (0: greedy)."""
    base_url: str | None = None
    """Tinker service URL for the LLM answerer."""
    scripted_split_noise: float = 0.0
    """Warm-start games (:meth:`scripted_episodes`): the halving player's ``split_noise``."""

    @chz.validate
    def _check(self) -> None:
        if self.batch_size < 1 or self.group_size < 1 or self.test_group_size < 1:
            raise ValueError("batch_size, group_size and test_group_size must be >= 1")
        if self.num_epochs < 1:
            raise ValueError(f"num_epochs must be >= 1, got {self.num_epochs}")
        if self.answerer_backend not in ("auto", "local", "tinker"):
            raise ValueError(
                f"answerer_backend must be 'auto', 'local' or 'tinker', got {self.answerer_backend!r}"
            )

    async def __call__(self) -> tuple[TwentyQuestionsDataset, TwentyQuestionsDataset]:
        return self.build()

    def build(
        self, answerer: Answerer | None = None
    ) -> tuple[TwentyQuestionsDataset, TwentyQuestionsDataset]:
        """The (train, test) datasets, with ``answerer`` or the one the fields describe."""
        answerer = answerer or self.make_answerer()
        train_words, test_words = split_words("train"), split_words("test")
        common = dict(
            answerer=answerer,
            config=self.env,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
        )
        train = TwentyQuestionsDataset(
            train_words,
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=self.num_batches or max(1, self.num_epochs * len(train_words) // self.batch_size),
            split="train",
            seed=self.seed,
            **common,  # type: ignore[arg-type]
        )
        test_batch = self.test_batch_size or len(test_words)
        test = TwentyQuestionsDataset(
            test_words,
            batch_size=test_batch,
            group_size=self.test_group_size,
            num_batches=max(1, len(test_words) // test_batch),
            split="test",  # one seeded order, so a first batch of a few words spans the kinds
            seed=self.test_seed,
            **common,  # type: ignore[arg-type]
        )
        return train, test

    async def scripted_episodes(self, n: int, seed: int) -> list[tuple[Env, TokenCompleter]]:
        """``n`` scripted games for a supervised warm start (``training.SupportsScriptedEpisodes``).

        Training words with candidate lists drawn with ``seed`` (apart from the RL batches), the
        KB answerer, and a scripted player: :class:`~envs.twenty_questions.HalvingPlayer`
        (binary search with set questions) when candidates are listed, else
        :class:`~envs.twenty_questions.KBOptimalPlayer`.
        """
        from envs.player import PlayerPolicy
        from envs.twenty_questions.players import HalvingPlayer, KBOptimalPlayer

        pool = TwentyQuestionsDataset(
            split_words("train"),
            batch_size=1,
            group_size=1,
            answerer=KBAnswerer(),
            config=self.env,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
            seed=seed,
        )
        renderer = load_renderer(self.renderer_name, self.model_name_for_tokenizer)
        episodes: list[tuple[Env, TokenCompleter]] = []
        for i in range(n):
            word, candidates = pool.item(i)
            env = TwentyQuestionsEnv(renderer, word, KBAnswerer(), self.env, candidates)
            player = (
                HalvingPlayer(
                    candidates,
                    max_questions=self.env.max_questions,
                    split_noise=self.scripted_split_noise,
                    seed=seed * 100_003 + i,
                )
                if candidates
                else KBOptimalPlayer(max_questions=self.env.max_questions)
            )
            episodes.append((env, PlayerPolicy(env, player)))
        return episodes

    def make_answerer(self) -> Answerer:
        """The answerer the fields describe (the LLM one samples through ``backend``)."""
        if self.answerer == AnswererKind.KB:
            return KBAnswerer()
        from tinker_cookbook.completers import TinkerMessageCompleter

        from backend import ClientFuture, make_service_client, resolve_backend

        which = resolve_backend(self.answerer_backend)  # type: ignore[arg-type]
        model = self.answerer_base_model or (SMOLLM2 if which == "local" else DEFAULT_LLM_ANSWERER)
        service = make_service_client(which, **({"base_url": self.base_url} if which == "tinker" else {}))
        client: Any = service.create_sampling_client(base_model=model)  # tinker's or the local one
        if isinstance(client, ClientFuture):
            client = client.result()
        completer = TinkerMessageCompleter(
            client,
            load_renderer(self.answerer_renderer_name or answerer_renderer_name(model), model),
            max_tokens=self.answerer_max_tokens,
            temperature=self.answerer_temperature,
        )
        return LLMAnswerer(completer)
