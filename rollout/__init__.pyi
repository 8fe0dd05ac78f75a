"""Public names of ``rollout`` (read by type checkers; imported lazily at run time by ``lazy_loader``)."""

from ._call import (
    SampleCall as SampleCall,
)
from ._compaction import (
    METRIC_COMPACTION as METRIC_COMPACTION,
)
from ._compaction import (
    METRIC_COMPACTION_UNSUPPORTED as METRIC_COMPACTION_UNSUPPORTED,
)
from ._compaction import (
    CompactionUnsupported as CompactionUnsupported,
)
from ._compaction import (
    SupportsCompaction as SupportsCompaction,
)
from ._compaction import (
    apply_compaction as apply_compaction,
)
from ._config import (
    AdvantageConfig as AdvantageConfig,
)
from ._config import (
    EngineConfig as EngineConfig,
)
from ._config import (
    ExtensionCheck as ExtensionCheck,
)
from ._config import (
    RolloutLimits as RolloutLimits,
)
from ._config import (
    Strategy as Strategy,
)
from ._config import (
    StrategyKind as StrategyKind,
)
from ._datums import (
    Assembled as Assembled,
)
from ._datums import (
    assemble as assemble,
)
from ._datums import (
    informative_groups as informative_groups,
)
from ._datums import (
    is_constant_group as is_constant_group,
)
from ._engine import (
    RolloutEngine as RolloutEngine,
)
from ._extension import (
    ExtensionBreak as ExtensionBreak,
)
from ._extension import (
    ExtensionTracker as ExtensionTracker,
)
from ._logs import (
    write_html as write_html,
)
from ._logs import (
    write_jsonl as write_jsonl,
)
from ._metrics import (
    summarize as summarize,
)
from ._results import (
    BatchAborted as BatchAborted,
)
from ._results import (
    BatchResult as BatchResult,
)
from ._results import (
    CleanupTimeout as CleanupTimeout,
)
from ._results import (
    GroupBelowFloor as GroupBelowFloor,
)
from ._results import (
    GroupOutcome as GroupOutcome,
)
from ._results import (
    InvalidCompletion as InvalidCompletion,
)
from ._results import (
    InvalidGroup as InvalidGroup,
)
from ._results import (
    RewardTimeout as RewardTimeout,
)
from ._results import (
    RolloutFailure as RolloutFailure,
)
from ._results import (
    StepTimeout as StepTimeout,
)
from ._results import (
    TrajectoryStats as TrajectoryStats,
)
from ._runner import (
    run_episode as run_episode,
)
