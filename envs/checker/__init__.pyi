"""Public names of ``envs.checker`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._report import (
    CheckName as CheckName,
)
from ._report import (
    CheckResult as CheckResult,
)
from ._report import (
    ConformanceReport as ConformanceReport,
)
from ._report import (
    Outcome as Outcome,
)
from ._run import (
    CheckConfig as CheckConfig,
)
from ._run import (
    FuzzStats as FuzzStats,
)
from ._run import (
    check_conformance as check_conformance,
)
from ._run import (
    fuzz_env as fuzz_env,
)
from ._run import (
    make_renderer as make_renderer,
)
from ._strategies import (
    ActionKind as ActionKind,
)
