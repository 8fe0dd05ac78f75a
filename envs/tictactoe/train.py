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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import chz

import training
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
class TicTacToeTrainConfig(training.Config):
    """:class:`training.Config` with tic-tac-toe defaults, the game (``env.*``) and its data keys."""

    log_path: str = "runs/tictactoe/default"
    max_tokens: int = 6
    temperature: float = 1.0
    max_steps: int = 12
    learning_rate: float = 5e-4
    eval_every: int = 12
    eval_temperature: float = 0.0
    win_metric: str = WIN_METRIC
    warm_start: TicTacToeWarmStart = chz.field(default_factory=TicTacToeWarmStart)

    env: TicTacToeConfig = chz.field(default_factory=TicTacToeConfig)
    """The rewards (``env.illegal_reward=-2`` ...)."""

    batch_size: int = 4
    """Groups per training step."""
    group_size: int = 8
    """Games per group (each self-play game gives an X and an O trajectory)."""
    train_opponents: str = "self"
    """``self`` (self-play), ``random``, ``optimal``, or a comma list drawn per game."""
    eval_opponents: str = "random,optimal"
    eval_games: int = 32
    """Held-out games per opponent (half as X, half as O)."""
    eval_seed: int = 0
    scripted_noise: float = 1.0
    """Warm start: how often the scripted minimax player plays a random legal cell instead (1:
    always, the format without the play; 0: minimax games)."""

    def eval_figures(self, metrics: Mapping[str, Any]) -> dict[str, float]:
        """``score_vs_<opponent>`` (win 1, draw 0.5, loss 0) per held-out opponent, and the share
        of the policy's games that ended on its illegal move (``illegal_rate``)."""
        from envs.seats import score_figures

        return score_figures(metrics, "tictactoe", self.eval_opponents)

    def dataset_builder(self) -> TicTacToeDatasetBuilder:
        from envs.tictactoe.builders import TicTacToeDatasetBuilder

        return TicTacToeDatasetBuilder(
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=max(1, self.max_steps),
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            env=self.env,
            seed=self.seed,
            train_opponents=self.train_opponents,
            eval_opponents=self.eval_opponents,
            eval_games=self.eval_games,
            eval_seed=self.eval_seed,
            scripted_noise=self.scripted_noise,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(TicTacToeTrainConfig, argv, prog="envs.tictactoe.train")


if __name__ == "__main__":
    raise SystemExit(main())
