"""TurnGym environments: the token-in/token-out core and the included envs (one folder each)."""

from envs.core import (
    METRIC_FAULT_PREFIX,
    METRIC_RERENDER,
    ChatEnv,
    EnvLimits,
    Fault,
    FaultPolicy,
    Reply,
    decode_action,
)
from envs.datasets import SeededDataset

__all__ = [
    "METRIC_FAULT_PREFIX",
    "METRIC_RERENDER",
    "ChatEnv",
    "EnvLimits",
    "Fault",
    "FaultPolicy",
    "Reply",
    "SeededDataset",
    "decode_action",
]
