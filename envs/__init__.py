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

__all__ = [
    "METRIC_FAULT_PREFIX",
    "METRIC_RERENDER",
    "ChatEnv",
    "EnvLimits",
    "Fault",
    "FaultPolicy",
    "Reply",
    "decode_action",
]
