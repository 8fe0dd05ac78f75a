"""Twenty Questions: the player asks yes/no questions, then answers ``Guess: <word>``.

Built on the token-in/token-out :class:`envs.core.ChatEnv`, with cookbook-compatible builders
(so it also runs in tinker-cookbook's own ``rl.train``). See :mod:`envs.twenty_questions.env`
for the rules and rewards.

- Config and env: :class:`TwentyQuestionsConfig`, :class:`TwentyQuestionsEnv`,
  :class:`TwentyQuestionsGame` (the rules without tokens), :class:`Metric`, :func:`player_prompt`.
- Builders: :class:`TwentyQuestionsGroupBuilder`, :class:`TwentyQuestionsDataset`,
  :class:`TwentyQuestionsDatasetBuilder` (chz), :class:`AnswererKind`.
- Answerers: :class:`Answerer`, :class:`KBAnswerer`, :class:`LLMAnswerer`, :class:`Answer`,
  :func:`understand`, :func:`parse_yes_no`.
- Words: :data:`ALL_WORDS`, :data:`TRAIN_WORDS`, :data:`TEST_WORDS`, :func:`pick_candidates`; the
  knowledge base's :class:`Attribute` (the KB itself and the turn parser are private).
- Scripted players: :class:`KBOptimalPlayer`, :class:`HalvingPlayer` (:func:`set_question`),
  :class:`FixedPlayer`, :func:`scripted_game`,
  :func:`play_game`, :func:`play_with_player`, :class:`GameRecord`.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
