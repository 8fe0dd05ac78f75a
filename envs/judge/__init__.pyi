"""Public names of ``envs.judge`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from .builders import (
    JudgeDatasetBuilder as JudgeDatasetBuilder,
)
from .builders import (
    PairwiseGroupBuilder as PairwiseGroupBuilder,
)
from .builders import (
    RubricGroupBuilder as RubricGroupBuilder,
)
from .cache import (
    JudgeCache as JudgeCache,
)
from .config import (
    SMALL_LOCAL_JUDGE as SMALL_LOCAL_JUDGE,
)
from .config import (
    JudgeConfig as JudgeConfig,
)
from .config import (
    JudgeEnvConfig as JudgeEnvConfig,
)
from .config import (
    JudgeEnvKind as JudgeEnvKind,
)
from .config import (
    OnTruncation as OnTruncation,
)
from .config import (
    PairingScheme as PairingScheme,
)
from .env import (
    PairwiseEnv as PairwiseEnv,
)
from .env import (
    RubricEnv as RubricEnv,
)
from .env import (
    RubricGrade as RubricGrade,
)
from .env import (
    SimulatedUser as SimulatedUser,
)
from .env import (
    UserConfig as UserConfig,
)
from .env import (
    grade as grade,
)
from .judge import (
    Judge as Judge,
)
from .judge import (
    JudgeResult as JudgeResult,
)
from .judge import (
    JudgeStatus as JudgeStatus,
)
from .judge import (
    clear_judges as clear_judges,
)
from .judge import (
    get_judge as get_judge,
)
from .pairwise import (
    TournamentResult as TournamentResult,
)
from .pairwise import (
    parse_preference as parse_preference,
)
from .pairwise import (
    run_tournament as run_tournament,
)
from .pairwise import (
    tournament_pairs as tournament_pairs,
)
from .pairwise import (
    win_rates as win_rates,
)
from .registry import (
    make_completer as make_completer,
)
from .registry import (
    register_completer as register_completer,
)
from .rubric import (
    Criterion as Criterion,
)
from .rubric import (
    GradingMode as GradingMode,
)
from .rubric import (
    Rubric as Rubric,
)
from .rubric import (
    load_rubrics as load_rubrics,
)
from .rubric import (
    parse_score as parse_score,
)
from .tasks import (
    JudgeTask as JudgeTask,
)
from .tasks import (
    load_tasks as load_tasks,
)
