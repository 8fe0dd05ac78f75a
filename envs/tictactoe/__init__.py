"""Tic-tac-toe: a two-seat zero-sum game on :mod:`envs.seats`, trained by self-play.

- Rules and rewards: :class:`TicTacToeConfig`, :class:`TicTacToeGame` (the board helpers and
  the minimax values live in :mod:`envs.tictactoe.env`).
- Scripted players: :class:`RandomPlayer`, :class:`OptimalPlayer`.
- Builders: :class:`TicTacToeDatasetBuilder` (chz),
  :func:`eval_builders`, :func:`make_opponent`, :data:`OPPONENTS`.
- Training: ``python -m envs.tictactoe.train`` (:class:`~envs.tictactoe.train.TicTacToeTrainConfig`).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
