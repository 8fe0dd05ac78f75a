"""Public names of ``envs.twenty_questions`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._kb import (
    QUESTIONS as QUESTIONS,
)
from ._kb import (
    Attribute as Attribute,
)
from ._kb import (
    KnowledgeBase as KnowledgeBase,
)
from ._kb import (
    default_kb as default_kb,
)
from ._text import (
    ParsedTurn as ParsedTurn,
)
from ._text import (
    TurnKind as TurnKind,
)
from ._text import (
    classify_turn as classify_turn,
)
from ._text import (
    parse_guess as parse_guess,
)
from .answerers import (
    ANSWER_TEXT as ANSWER_TEXT,
)
from .answerers import (
    ANSWERER_PROMPT as ANSWERER_PROMPT,
)
from .answerers import (
    WRONG_GUESS as WRONG_GUESS,
)
from .answerers import (
    Answer as Answer,
)
from .answerers import (
    Answerer as Answerer,
)
from .answerers import (
    AnswerResult as AnswerResult,
)
from .answerers import (
    KBAnswerer as KBAnswerer,
)
from .answerers import (
    LLMAnswerer as LLMAnswerer,
)
from .answerers import (
    Understanding as Understanding,
)
from .answerers import (
    parse_yes_no as parse_yes_no,
)
from .answerers import (
    understand as understand,
)
from .config import (
    CANDIDATES_SENTENCE as CANDIDATES_SENTENCE,
)
from .config import (
    PLAYER_PROMPT as PLAYER_PROMPT,
)
from .config import (
    TwentyQuestionsConfig as TwentyQuestionsConfig,
)
from .env import (
    FORMAT_REMINDER as FORMAT_REMINDER,
)
from .env import (
    AnswererKind as AnswererKind,
)
from .env import (
    EpisodeStats as EpisodeStats,
)
from .env import (
    GameStep as GameStep,
)
from .env import (
    Metric as Metric,
)
from .env import (
    TwentyQuestionsDataset as TwentyQuestionsDataset,
)
from .env import (
    TwentyQuestionsDatasetBuilder as TwentyQuestionsDatasetBuilder,
)
from .env import (
    TwentyQuestionsEnv as TwentyQuestionsEnv,
)
from .env import (
    TwentyQuestionsGame as TwentyQuestionsGame,
)
from .env import (
    TwentyQuestionsGroupBuilder as TwentyQuestionsGroupBuilder,
)
from .env import (
    answerer_renderer_name as answerer_renderer_name,
)
from .env import (
    is_correct_guess as is_correct_guess,
)
from .env import (
    player_prompt as player_prompt,
)
from .players import (
    FixedPlayer as FixedPlayer,
)
from .players import (
    HalvingPlayer as HalvingPlayer,
)
from .players import (
    KBOptimalPlayer as KBOptimalPlayer,
)
from .players import (
    set_question as set_question,
)
from .scripted import (
    GameRecord as GameRecord,
)
from .scripted import (
    play_game as play_game,
)
from .scripted import (
    play_with_player as play_with_player,
)
from .scripted import (
    scripted_game as scripted_game,
)
from .scripted import (
    text_to_action as text_to_action,
)
from .words import (
    ALL_WORDS as ALL_WORDS,
)
from .words import (
    TEST_WORDS as TEST_WORDS,
)
from .words import (
    TRAIN_WORDS as TRAIN_WORDS,
)
from .words import (
    pick_candidates as pick_candidates,
)
from .words import (
    split_words as split_words,
)
