"""The cookbook's policy interfaces and completers, re-exported by :mod:`completers`."""

from tinker_cookbook.completers import (
    MessageCompleter,
    StopCondition,
    TinkerMessageCompleter,
    TinkerTokenCompleter,
    TokenCompleter,
    TokensWithLogprobs,
)

__all__ = [
    "MessageCompleter",
    "StopCondition",
    "TinkerMessageCompleter",
    "TinkerTokenCompleter",
    "TokenCompleter",
    "TokensWithLogprobs",
]
