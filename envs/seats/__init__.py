"""Multi-seat games: N seats in one game, each a token-level env, driven by one game loop.

- The form: :class:`Game` (``initial_messages(seat)``, ``on_move(seat, message) -> Move``,
  optional ``forfeit``), the frozen :class:`Move`, :class:`SeatEnv` (a seat's token history).
- Who plays: :class:`Seat` (``Seat.policy()``, ``Seat.pinned(name, player)``,
  ``Seat.partner(name, player)``, ``Seat.pool(name, seats)``), :func:`seat_policy`.
- The loop: :func:`play_game` -> :class:`GameRecord` (one :class:`SeatResult` per seat),
  :class:`LoopConfig`; the ``STOP_*`` game stop reasons.
- Groups: :class:`SeatedGroupBuilder` (games x seats, one ``TrajectoryGroup`` per training role,
  ``rollout_seated`` for the training loop), :func:`game_seed`.
- Two-seat zero-sum games against fixed opponents: a game's chz bases
  :class:`TwoSeatDatasetBuilder` and :class:`TwoSeatTrainConfig`, :class:`Opponents`,
  :func:`held_out_builders`, :func:`score_figures`.

See ``docs/multi-seat.md``.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
