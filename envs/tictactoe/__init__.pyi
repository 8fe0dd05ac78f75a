"""Public names of ``envs.tictactoe`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from .builders import (
    OPPONENTS as OPPONENTS,
)
from .builders import (
    TicTacToeDatasetBuilder as TicTacToeDatasetBuilder,
)
from .builders import (
    eval_builders as eval_builders,
)
from .builders import (
    make_opponent as make_opponent,
)
from .config import (
    TicTacToeConfig as TicTacToeConfig,
)
from .env import (
    TicTacToeGame as TicTacToeGame,
)
from .players import (
    OptimalPlayer as OptimalPlayer,
)
from .players import (
    RandomPlayer as RandomPlayer,
)
