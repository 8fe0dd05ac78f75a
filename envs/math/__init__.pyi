"""Public names of ``envs.math`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from .builders import (
    MathDatasetBuilder as MathDatasetBuilder,
)
from .builders import (
    MathGroupBuilder as MathGroupBuilder,
)
from .builders import (
    ProblemsDatasetBuilder as ProblemsDatasetBuilder,
)
from .calculator import (
    CalculatorError as CalculatorError,
)
from .calculator import (
    CalculatorLimits as CalculatorLimits,
)
from .calculator import (
    evaluate as evaluate,
)
from .config import (
    CalculatorMode as CalculatorMode,
)
from .config import (
    EnvPreset as EnvPreset,
)
from .config import (
    MathEnvConfig as MathEnvConfig,
)
from .data import (
    DatasetFormatError as DatasetFormatError,
)
from .data import (
    MathProblem as MathProblem,
)
from .data import (
    Split as Split,
)
from .data import (
    check_source as check_source,
)
from .data import (
    generate_problems as generate_problems,
)
from .data import (
    load_gsm8k as load_gsm8k,
)
from .data import (
    load_jsonl as load_jsonl,
)
from .data import (
    load_math as load_math,
)
from .data import (
    load_split as load_split,
)
from .env import (
    METRIC_CORRECT as METRIC_CORRECT,
)
from .env import (
    MathEnv as MathEnv,
)
from .grading import (
    Grader as Grader,
)
from .grading import (
    GraderConfig as GraderConfig,
)
from .grading import (
    GradeResult as GradeResult,
)
from .grading import (
    GradeStatus as GradeStatus,
)
from .grading import (
    default_grader as default_grader,
)
from .grading import (
    normalize_answer as normalize_answer,
)
from .thinking import (
    ThinkingSolver as ThinkingSolver,
)
