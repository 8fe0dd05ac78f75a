"""Public names of ``envs.twenty_questions`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._kb import (
    Attribute as Attribute,
)
from .answerers import (
    Answer as Answer,
)
from .answerers import (
    Answerer as Answerer,
)
from .answerers import (
    KBAnswerer as KBAnswerer,
)
from .answerers import (
    LLMAnswerer as LLMAnswerer,
)
from .answerers import (
    parse_yes_no as parse_yes_no,
)
from .answerers import (
    understand as understand,
)
from .builders import (
    AnswererKind as AnswererKind,
)
from .builders import (
    TwentyQuestionsDataset as TwentyQuestionsDataset,
)
from .builders import (
    TwentyQuestionsDatasetBuilder as TwentyQuestionsDatasetBuilder,
)
from .builders import (
    TwentyQuestionsGroupBuilder as TwentyQuestionsGroupBuilder,
)
from .config import (
    PLAYER_PROMPT as PLAYER_PROMPT,
)
from .config import (
    TwentyQuestionsConfig as TwentyQuestionsConfig,
)
from .env import (
    Metric as Metric,
)
from .env import (
    TwentyQuestionsEnv as TwentyQuestionsEnv,
)
from .env import (
    TwentyQuestionsGame as TwentyQuestionsGame,
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
