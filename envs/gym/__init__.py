"""Gymnasium adapter: any token-level env as a ``gymnasium.Env``, plus a text-level view.

- :class:`TokenEnv`: a TurnGym / cookbook-style env (an ``EnvGroupBuilder``, ``RLDataset`` or env
  factory) as a ``gymnasium.Env`` with ``Sequence(Discrete(vocab_size))`` spaces.
- :class:`TextEnv`: strings in, strings out (actions tokenised, end-of-turn appended).
- :func:`register_envs`: registers the ``turngym/...`` ids and those installed packages declare
  in the ``turngym.envs`` entry-point group (done on import of this package);
  ``gymnasium.make("turngym/Math-v0")`` then works. The env packages load only on ``make``.
  ``python -m envs.list`` lists what is installed.
"""

from envs.gym._adapter import (
    TRUNCATION_REASONS,
    EnvSource,
    EpisodeEnd,
    TokenEnv,
    TokenObs,
    is_truncation,
    resolve_builder,
    stop_reason_of,
)
from envs.gym._registry import ENTRIES, ENV_IDS, EnvEntry, LazyDatasetFactory, env_source, register_envs
from envs.gym._text import TextEnv, UnicodeText

register_envs()

__all__ = [
    "ENTRIES",
    "ENV_IDS",
    "TRUNCATION_REASONS",
    "EnvEntry",
    "EnvSource",
    "EpisodeEnd",
    "LazyDatasetFactory",
    "TextEnv",
    "TokenEnv",
    "TokenObs",
    "UnicodeText",
    "env_source",
    "is_truncation",
    "register_envs",
    "resolve_builder",
    "stop_reason_of",
]
