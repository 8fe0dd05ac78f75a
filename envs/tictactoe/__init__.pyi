"""Public names of ``envs.tictactoe`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from .builders import (
    OPPONENTS as OPPONENTS,
)
from .builders import (
    TicTacToeDataset as TicTacToeDataset,
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
    Metric as Metric,
)
from .env import (
    TicTacToeGame as TicTacToeGame,
)
from .env import (
    free_cells as free_cells,
)
from .env import (
    move_values as move_values,
)
from .env import (
    parse_board as parse_board,
)
from .env import (
    parse_move as parse_move,
)
from .env import (
    render_board as render_board,
)
from .env import (
    winner as winner,
)
from .players import (
    OptimalPlayer as OptimalPlayer,
)
from .players import (
    RandomPlayer as RandomPlayer,
)
