"""Public names of ``envs`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from .core import (
    METRIC_FAULT_PREFIX as METRIC_FAULT_PREFIX,
)
from .core import (
    ChatEnv as ChatEnv,
)
from .core import (
    EnvLimits as EnvLimits,
)
from .core import (
    Fault as Fault,
)
from .core import (
    FaultPolicy as FaultPolicy,
)
from .core import (
    Reply as Reply,
)
from .core import (
    TurnEnd as TurnEnd,
)
from .core import (
    decode_action as decode_action,
)
from .datasets import (
    GroupDataset as GroupDataset,
)
from .datasets import (
    SeededDataset as SeededDataset,
)
from .player import (
    PlayerPolicy as PlayerPolicy,
)
