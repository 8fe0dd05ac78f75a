"""Public names of ``envs.seats`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._builder import (
    SeatedGroupBuilder as SeatedGroupBuilder,
)
from ._builder import (
    game_seed as game_seed,
)
from ._game import (
    STOP_MAX_MOVES as STOP_MAX_MOVES,
)
from ._game import (
    STOP_SEAT_ERROR as STOP_SEAT_ERROR,
)
from ._game import (
    STOP_SEAT_FAULT as STOP_SEAT_FAULT,
)
from ._game import (
    STOP_SEAT_LIMIT as STOP_SEAT_LIMIT,
)
from ._game import (
    STOP_SEAT_TIMEOUT as STOP_SEAT_TIMEOUT,
)
from ._game import (
    Game as Game,
)
from ._game import (
    Move as Move,
)
from ._game import (
    SeatEnv as SeatEnv,
)
from ._loop import (
    METRIC_ILLEGAL as METRIC_ILLEGAL,
)
from ._loop import (
    GameRecord as GameRecord,
)
from ._loop import (
    LoopConfig as LoopConfig,
)
from ._loop import (
    SeatResult as SeatResult,
)
from ._loop import (
    play_game as play_game,
)
from ._models import (
    BASE as BASE,
)
from ._models import (
    CHECKPOINT as CHECKPOINT,
)
from ._models import (
    model_player as model_player,
)
from ._players import (
    POLICY as POLICY,
)
from ._players import (
    Player as Player,
)
from ._players import (
    PlayerFactory as PlayerFactory,
)
from ._players import (
    Seat as Seat,
)
from ._players import (
    seat_policy as seat_policy,
)
from ._solo import (
    SoloSeatEnv as SoloSeatEnv,
)
from ._train import (
    TwoSeatTrainConfig as TwoSeatTrainConfig,
)
from ._train import (
    score_figures as score_figures,
)
from ._two_seat import (
    Opponents as Opponents,
)
from ._two_seat import (
    TwoSeatDatasetBuilder as TwoSeatDatasetBuilder,
)
from ._two_seat import (
    held_out_builders as held_out_builders,
)
