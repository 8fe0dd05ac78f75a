"""TurnGym environments: the token-in/token-out core and the included envs (one folder each)."""

from typing import TYPE_CHECKING

from envs._lazy import attach

if TYPE_CHECKING:  # the public names; imported lazily at run time (envs._lazy)
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

__getattr__, __dir__ = attach(__name__, __file__)

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
