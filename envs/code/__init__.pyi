"""Public names of ``envs.code`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from .builders import (
    CodeDatasetBuilder as CodeDatasetBuilder,
)
from .builders import (
    CodeGroupBuilder as CodeGroupBuilder,
)
from .config import (
    CodeEnvConfig as CodeEnvConfig,
)
from .config import (
    ToolFormat as ToolFormat,
)
from .env import (
    PROGRAMS as PROGRAMS,
)
from .env import (
    PYTHON_TOOL as PYTHON_TOOL,
)
from .env import (
    CodeEnv as CodeEnv,
)
from .env import (
    code_action_messages as code_action_messages,
)
from .escapes import (
    ESCAPE_ATTEMPTS as ESCAPE_ATTEMPTS,
)
from .escapes import (
    EscapeOutcome as EscapeOutcome,
)
from .escapes import (
    run_escape_attempts as run_escape_attempts,
)
from .sandbox import (
    Isolation as Isolation,
)
from .sandbox import (
    RunResult as RunResult,
)
from .sandbox import (
    RunStatus as RunStatus,
)
from .sandbox import (
    Sandbox as Sandbox,
)
from .sandbox import (
    SandboxConfig as SandboxConfig,
)
from .sandbox import (
    SandboxLimits as SandboxLimits,
)
from .sandbox import (
    SandboxUnavailable as SandboxUnavailable,
)
