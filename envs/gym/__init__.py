"""Gymnasium adapter: any token-level env as a ``gymnasium.Env``, plus a text-level view.

- :class:`TokenEnv`: a TurnGym / cookbook-style env (an ``EnvGroupBuilder``, ``RLDataset`` or env
  factory) as a ``gymnasium.Env`` with ``Sequence(Discrete(vocab_size))`` spaces.
- :class:`TextEnv`: strings in, strings out (actions tokenised, end-of-turn appended).
- :func:`register_envs`: registers the ``turngym/...`` ids and those installed packages declare
  in the ``turngym.envs`` entry-point group (done on import of this package);
  ``gymnasium.make("turngym/Math-v0")`` then works. The env packages load only on ``make``.
  ``python -m envs.list`` lists what is installed.
"""

import lazy_loader

from envs.gym._registry import register_envs as _register_envs

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi

_register_envs()  # the turngym/... ids: cheap, no env package is imported
