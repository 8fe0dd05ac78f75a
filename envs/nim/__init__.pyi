"""Public names of ``envs.nim`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from .builders import (
    OPPONENTS as OPPONENTS,
)
from .builders import (
    NimDatasetBuilder as NimDatasetBuilder,
)
from .builders import (
    eval_builders as eval_builders,
)
from .builders import (
    make_opponent as make_opponent,
)
from .config import (
    NimConfig as NimConfig,
)
from .env import (
    NimGame as NimGame,
)
from .players import (
    OptimalPlayer as OptimalPlayer,
)
from .players import (
    RandomPlayer as RandomPlayer,
)
