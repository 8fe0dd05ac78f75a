"""Public names of ``training`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._cli import (
    parse_config as parse_config,
)
from ._cli import (
    run_cli as run_cli,
)
from ._cli import (
    run_pipeline_cli as run_pipeline_cli,
)
from ._config import (
    Config as Config,
)
from ._config import (
    ConfigError as ConfigError,
)
from ._config import (
    LRSchedule as LRSchedule,
)
from ._config import (
    WarmStartConfig as WarmStartConfig,
)
from ._loop import (
    METRIC_NO_DATUM as METRIC_NO_DATUM,
)
from ._loop import (
    RunFolderError as RunFolderError,
)
from ._loop import (
    TrainSummary as TrainSummary,
)
from ._loop import (
    WarmStart as WarmStart,
)
from ._loop import (
    train as train,
)
from ._loop import (
    train_async as train_async,
)
from ._rollouts import (
    SeededTokenCompleter as SeededTokenCompleter,
)
from ._rollouts import (
    call_seed as call_seed,
)
from ._warm_start import (
    ScriptedEpisode as ScriptedEpisode,
)
from ._warm_start import (
    SupportsScriptedEpisodes as SupportsScriptedEpisodes,
)
from ._warm_start import (
    scripted_datums as scripted_datums,
)
from ._warm_start import (
    sft_datum as sft_datum,
)
from ._warm_start import (
    supervised_warm_start as supervised_warm_start,
)
