"""Train a tic-tac-toe player by self-play: ``python -m envs.tictactoe.train [key=value ...]``.

With no arguments: the embedded SmolLM2-135M on the local backend (offline), in two stages, each
reported on its own (``train.log`` and ``eval.jsonl``: step 0 is the held-out result right after
the warm start, the last step the result after RL):

1. **Warm start** (``warm_start.*``): ``cross_entropy`` steps on scripted games of random legal
   moves against a random player (the scripted seat X in half of them, O in the other half): the
   policy learns the move format (one free cell number), not the play, and starts RL near a
   random player. ``scripted_noise=0`` scripts the minimax player instead (then the warm start
   teaches much of the play, and leaves RL little to add against a random opponent).
2. **RL by self-play**: the policy holds both seats of every game (``train_opponents=self``;
   ``self,random`` mixes in a random opponent per game, against the collapse the cookbook's
   recipe reports in long self-play runs); both seats train, each centred within its own role in
   its group (an X game against X games, an O game against O games).

Held-out games (``eval_games`` per opponent, half as X and half as O, the opponents seeded per
game from ``eval_seed``, greedy) against a random player and the minimax player: ``eval.jsonl``
holds the win/draw/loss table per opponent (``eval/env/vs_random/tictactoe/{win,draw,loss}``),
and the figures ``score_vs_<opponent>`` (win 1, draw 0.5, loss 0) and ``illegal_rate``.
Measured figures are in ``NOTES.md`` beside this module.

Every key of :class:`training.Config` works, the game's rewards as ``env.*`` (``env.illegal_reward=-2``),
and the data keys below; ``--help`` lists them. Rerunning with the same ``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import chz

import training
from envs.seats import TwoSeatTrainConfig
from envs.tictactoe.config import TicTacToeConfig

if TYPE_CHECKING:
    from envs.tictactoe.builders import TicTacToeDatasetBuilder

WIN_METRIC = "tictactoe/win"


@chz.chz
class TicTacToeWarmStart(training.WarmStartConfig):
    """:class:`training.WarmStartConfig` with this game's defaults."""

    episodes: int = 64
    steps: int = 8
    batch_size: int = 16


@chz.chz
class TicTacToeTrainConfig(TwoSeatTrainConfig):
    """:class:`envs.seats.TwoSeatTrainConfig` with tic-tac-toe defaults and the game (``env.*``)."""

    log_path: str = "runs/tictactoe/default"
    max_tokens: int = 6
    max_steps: int = 12
    learning_rate: float = 5e-4
    eval_every: int = 12
    eval_temperature: float = 0.0
    win_metric: str = WIN_METRIC
    warm_start: TicTacToeWarmStart = chz.field(default_factory=TicTacToeWarmStart)

    env: TicTacToeConfig = chz.field(default_factory=TicTacToeConfig)
    """The rewards (``env.illegal_reward=-2`` ...)."""

    def builder_class(self) -> type[TicTacToeDatasetBuilder]:
        from envs.tictactoe.builders import TicTacToeDatasetBuilder

        return TicTacToeDatasetBuilder


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(TicTacToeTrainConfig, argv, prog="envs.tictactoe.train")


if __name__ == "__main__":
    raise SystemExit(main())
