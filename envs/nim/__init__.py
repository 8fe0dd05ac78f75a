"""Nim (one pile, take 1 to 3, the last stone wins): a two-seat zero-sum game on
:mod:`envs.seats`, small enough that self-play RL learns it offline.

- Rules and rewards: :class:`NimConfig`, :class:`NimGame` (the helpers live in :mod:`envs.nim.env`).
- Scripted players: :class:`RandomPlayer`, :class:`OptimalPlayer`.
- Builders: :class:`NimDatasetBuilder` (chz), :func:`eval_builders`, :func:`make_opponent`,
  :data:`OPPONENTS`.
- Training: ``python -m envs.nim.train`` (:class:`~envs.nim.train.NimTrainConfig`).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
