"""The rules of a Twenty Questions game: :class:`TwentyQuestionsConfig` (chz, cheap to import).

This module imports only chz, so ``python -m envs.twenty_questions.train`` can expose the whole
config as nested command-line keys (``env.candidates=8``) and still reject a bad key in well under
a second. Its defaults are THE default setting of the game: the one ``train.py`` trains and the
gymnasium id plays; nothing else re-declares them.
"""

from __future__ import annotations

import chz

PLAYER_PROMPT = (
    "Let's play twenty questions. I am thinking of a secret word.{candidates} "
    "You have {max_questions} turns. Each turn, ask one yes/no question, or answer `Guess: <word>`."
)
"""The player's prompt: ``{candidates}`` becomes :data:`CANDIDATES_SENTENCE` (or nothing when
the player is not told the candidates), ``{max_questions}`` the number of turns."""
CANDIDATES_SENTENCE = " It is one of these words: {words}."
"""How the candidate list is told to the player (``{words}``: comma-separated)."""


@chz.chz
class TwentyQuestionsConfig:
    """Rules, rewards and difficulty of one game (picklable, frozen).

    The defaults are the real game that ``python -m envs.twenty_questions.train`` (``make
    train``) teaches SmolLM2-135M: 8 candidate words listed in the prompt and 4 turns, so guessing
    them in turn wins at most half the games and winning more takes questions that split the
    words still possible; questions are free; truncated turns are played as written (a 16-token
    budget cut ~90% of the untrained model's turns, often after a correct ``Guess: <word>``).
    The easy smoke-test setting is ``candidates=4, question_reward=-0.05`` (4 candidates in 4
    turns: asking cannot help, and without the cost a run can settle on "ask anything", where
    wins, and so learning, become rare). The classic game is
    ``TwentyQuestionsConfig(max_questions=20, candidates=0, play_truncated=False)``.
    """

    max_questions: int = 4
    """Player turns allowed (questions, guesses and format violations all count)."""
    candidates: int = 8
    """Difficulty: tell the player the secret is one of this many listed words (0: not told)."""
    win_reward: float = 1.0
    """Reward for guessing the secret word."""
    efficiency_bonus: float = 0.0
    """Extra reward for winning early: ``efficiency_bonus * (max_questions - turns_before) / max_questions``."""
    wrong_guess_reward: float = 0.0
    """Reward of a wrong guess (e.g. negative to discourage guessing every candidate)."""
    question_reward: float = 0.0
    """Reward of a question (negative: a cost of asking, for settings where asking cannot help,
    e.g. the smoke test's -0.05; see the class docstring)."""
    max_guesses: int | None = None
    """Wrong guesses allowed before the game is lost (None: any number, within the turn budget)."""
    format_penalty: float = 0.1
    """Subtracted for a turn that is neither one question nor one guess."""
    fault_penalty: float = 0.1
    """Subtracted for a faulty action (truncated unless played, empty, invalid UTF-8,
    unparseable), which ends the episode."""
    play_truncated: bool = True
    """Play a turn cut by ``max_tokens`` as written (its first guess or question counts; otherwise
    the format penalty) instead of ending the game with the fault penalty. The turn is closed
    with the end-of-turn token, so the token history still extends (one datum per episode)."""
    truncation_penalty: float = 0.0
    """Subtracted for a truncated turn that is played (``play_truncated``): a cost of not
    finishing the turn, on top of whatever the turn earns as a guess, question or violation."""
    max_trajectory_tokens: int | None = None
    """Observation length cap (see ``envs.core.EnvLimits``); None: no cap."""
    prompt: str = PLAYER_PROMPT
    """The player's prompt template (placeholders ``{candidates}`` and ``{max_questions}``)."""

    @chz.validate
    def _check(self) -> None:
        if self.max_questions < 1:
            raise ValueError(f"max_questions must be >= 1, got {self.max_questions}")
        if self.candidates < 0:
            raise ValueError(f"candidates must be >= 0, got {self.candidates}")
        if self.max_guesses is not None and self.max_guesses < 1:
            raise ValueError(f"max_guesses must be >= 1 or None, got {self.max_guesses}")
        if self.format_penalty < 0 or self.fault_penalty < 0 or self.truncation_penalty < 0:
            raise ValueError(
                "format_penalty, fault_penalty and truncation_penalty are amounts subtracted: they must be >= 0"
            )
        if self.max_trajectory_tokens is not None and self.max_trajectory_tokens < 1:
            raise ValueError(f"max_trajectory_tokens must be >= 1 or None, got {self.max_trajectory_tokens}")
        try:
            self.prompt.format(candidates="", max_questions=1)
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(
                f"prompt template must use only {{candidates}} and {{max_questions}}: {e}"
            ) from None


@chz.chz
class TwentyQuestionsData:
    """The data keys of ``python -m envs.twenty_questions.train`` (``data.batch_size=8``...): the
    fields of :class:`~envs.twenty_questions.TwentyQuestionsDatasetBuilder` under the same names,
    with the main job's defaults (the train command passes them to the builder as they are)."""

    batch_size: int = 8
    """Secret words (groups) per training step."""
    group_size: int = 8
    """Games per secret word (the GRPO group)."""
    test_batch_size: int = 64
    """Held-out games per evaluation (the first ones of the held-out split, in its seeded order:
    its 61 words, then words again with other candidate lists)."""
    test_group_size: int = 1
    """Games per held-out word and candidate list (greedy evaluation plays identical games
    identically, so more than 1 only helps at ``eval_temperature > 0``)."""
    test_seed: int = 0
    """Seed of the held-out games (word order, candidate lists), apart from ``seed``: runs with
    any seed are evaluated on the same games."""
    scripted_split_noise: float = 0.3
    """Warm start (``warm_start.episodes > 0``): probability that a scripted question splits the
    words still possible at random instead of in half (0: exact halving, which leaves RL too
    little room; 1: a noisy player that teaches worse splits, which RL then has to unlearn; the
    main job's 0.3 sits between; the figures are in ``NOTES.md`` beside this package)."""
    scripted_exact_questions: int = 0
    """Warm start: the scripted player's first this many questions always halve the words (the
    ``scripted_split_noise`` draws on later questions only)."""

    @chz.validate
    def _check(self) -> None:
        for name in ("batch_size", "group_size", "test_batch_size", "test_group_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"data.{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.scripted_split_noise <= 1.0:
            raise ValueError(f"data.scripted_split_noise must be in [0, 1], got {self.scripted_split_noise}")
        if self.scripted_exact_questions < 0:
            raise ValueError(
                f"data.scripted_exact_questions must be >= 0, got {self.scripted_exact_questions}"
            )
