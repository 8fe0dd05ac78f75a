"""Twenty Questions: the player asks yes/no questions, then answers ``Guess: <word>``.

Built on the token-in/token-out :class:`envs.core.ChatEnv`, with cookbook-compatible builders
(so it also runs in tinker-cookbook's own ``rl.train``). See :mod:`envs.twenty_questions.env`
for the rules and rewards.

- Config and env: :class:`TwentyQuestionsConfig`, :class:`TwentyQuestionsEnv`,
  :class:`TwentyQuestionsGame` (the rules without tokens), :class:`Metric`, :func:`player_prompt`.
- Builders: :class:`TwentyQuestionsGroupBuilder`, :class:`TwentyQuestionsDataset`,
  :class:`TwentyQuestionsDatasetBuilder` (chz), :class:`AnswererKind`.
- Answerers: :class:`Answerer`, :class:`KBAnswerer`, :class:`LLMAnswerer`, :class:`Answer`,
  :class:`AnswerResult`, :func:`understand`, :func:`parse_yes_no`.
- Knowledge base and words: :class:`KnowledgeBase`, :class:`Attribute`, :data:`QUESTIONS`,
  :func:`default_kb`, :data:`ALL_WORDS`, :data:`TRAIN_WORDS`, :data:`TEST_WORDS`,
  :func:`pick_candidates`.
- Text: :func:`parse_guess`, :func:`classify_turn`, :class:`TurnKind`.
- Scripted players: :class:`KBOptimalPlayer`, :class:`HalvingPlayer` (:func:`set_question`),
  :class:`FixedPlayer`, :func:`scripted_game`,
  :func:`play_game`, :func:`play_env`, :func:`text_to_action`, :class:`GameRecord`.
"""

from typing import TYPE_CHECKING

from envs._lazy import attach

if TYPE_CHECKING:  # the public names; imported lazily at run time (envs._lazy)
    from envs.twenty_questions._kb import QUESTIONS, Attribute, KnowledgeBase, default_kb
    from envs.twenty_questions._text import ParsedTurn, TurnKind, classify_turn, parse_guess
    from envs.twenty_questions.answerers import (
        ANSWER_TEXT,
        ANSWERER_PROMPT,
        Answer,
        Answerer,
        AnswerResult,
        KBAnswerer,
        LLMAnswerer,
        Understanding,
        parse_yes_no,
        understand,
    )
    from envs.twenty_questions.env import (
        CANDIDATES_SENTENCE,
        FORMAT_REMINDER,
        PLAYER_PROMPT,
        WRONG_GUESS,
        AnswererKind,
        EpisodeStats,
        GameStep,
        Metric,
        TwentyQuestionsConfig,
        TwentyQuestionsDataset,
        TwentyQuestionsDatasetBuilder,
        TwentyQuestionsEnv,
        TwentyQuestionsGame,
        TwentyQuestionsGroupBuilder,
        answerer_renderer_name,
        is_correct_guess,
        make_renderer,
        player_prompt,
    )
    from envs.twenty_questions.scripted import (
        FixedPlayer,
        GameRecord,
        HalvingPlayer,
        KBOptimalPlayer,
        play_env,
        play_game,
        scripted_game,
        set_question,
        text_to_action,
    )
    from envs.twenty_questions.words import ALL_WORDS, TEST_WORDS, TRAIN_WORDS, pick_candidates, split_words

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "ALL_WORDS",
    "ANSWERER_PROMPT",
    "ANSWER_TEXT",
    "CANDIDATES_SENTENCE",
    "FORMAT_REMINDER",
    "PLAYER_PROMPT",
    "QUESTIONS",
    "TEST_WORDS",
    "TRAIN_WORDS",
    "WRONG_GUESS",
    "Answer",
    "AnswerResult",
    "Answerer",
    "AnswererKind",
    "Attribute",
    "EpisodeStats",
    "FixedPlayer",
    "GameRecord",
    "GameStep",
    "HalvingPlayer",
    "KBAnswerer",
    "KBOptimalPlayer",
    "KnowledgeBase",
    "LLMAnswerer",
    "Metric",
    "ParsedTurn",
    "TurnKind",
    "TwentyQuestionsConfig",
    "TwentyQuestionsDataset",
    "TwentyQuestionsDatasetBuilder",
    "TwentyQuestionsEnv",
    "TwentyQuestionsGame",
    "TwentyQuestionsGroupBuilder",
    "Understanding",
    "answerer_renderer_name",
    "classify_turn",
    "default_kb",
    "is_correct_guess",
    "make_renderer",
    "parse_guess",
    "parse_yes_no",
    "pick_candidates",
    "play_env",
    "play_game",
    "player_prompt",
    "scripted_game",
    "set_question",
    "split_words",
    "text_to_action",
    "understand",
]
