"""Public names of ``envs.gym`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._adapter import (
    EnvSource as EnvSource,
)
from ._adapter import (
    EpisodeEnd as EpisodeEnd,
)
from ._adapter import (
    TokenEnv as TokenEnv,
)
from ._adapter import (
    is_truncation as is_truncation,
)
from ._adapter import (
    resolve_builder as resolve_builder,
)
from ._registry import (
    ENV_IDS as ENV_IDS,
)
from ._registry import (
    env_source as env_source,
)
from ._registry import (
    register_envs as register_envs,
)
from ._text import (
    TextEnv as TextEnv,
)
