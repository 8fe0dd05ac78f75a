"""Train a Nim player by self-play: ``python -m envs.nim.train [key=value ...]``.

With no arguments: the embedded SmolLM2-135M on the local backend (offline), in two stages, each
reported on its own (``train.log`` and ``eval.jsonl``: step 0 is the held-out result right after
the warm start, the last step the result after RL):

1. **Warm start** (``warm_start.*``): ``cross_entropy`` steps on scripted games of random legal
   moves against a random player (the scripted seat first in half of them, second in the other
   half): the policy learns the move format (one legal number), not the play, and starts RL near
   a random player. ``scripted_noise=0`` scripts the optimal player instead.
2. **RL by self-play mixed with a random opponent**: the second seat of each game is drawn from
   the policy itself (both seats train, each centred within its own role in its group) and,
   twice as often, a random player (``train_opponents=self,random,random``; ``self`` is pure
   self-play); 6 steps of 2 groups x 8 games at ``learning_rate=1e-3``, the job of
   ``bench/self_play.py``.

Held-out games (``eval_games`` per opponent, half moving first and half second, piles and
opponents seeded per game from ``eval_seed``) against a random player and the optimal player:
``eval.jsonl`` holds the win/loss table per opponent (``eval/env/vs_random/nim/{win,loss}``), and
the figures ``score_vs_<opponent>`` (the win rate) and ``illegal_rate``. Measured figures are in
``NOTES.md`` beside this module.

Every key of :class:`training.Config` works, the game's rules and rewards as ``env.*``
(``env.pile_max=20``), and the data keys below; ``--help`` lists them. Rerunning with the same
``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import chz

import training
from envs.nim.config import NimConfig
from envs.seats import TwoSeatTrainConfig

if TYPE_CHECKING:
    from envs.nim.builders import NimDatasetBuilder

WIN_METRIC = "nim/win"


@chz.chz
class NimWarmStart(training.WarmStartConfig):
    """:class:`training.WarmStartConfig` with this game's defaults."""

    episodes: int = 64
    steps: int = 4
    batch_size: int = 16


@chz.chz
class NimTrainConfig(TwoSeatTrainConfig):
    """:class:`envs.seats.TwoSeatTrainConfig` with Nim defaults and the game (``env.*``); the
    held-out ``score_vs_<opponent>`` is the win rate (Nim has no draws)."""

    log_path: str = "runs/nim/default"
    max_tokens: int = 4
    max_steps: int = 6
    learning_rate: float = 1e-3
    eval_every: int = 6
    eval_temperature: float = 1.0
    batch_size: int = 2
    train_opponents: str = "self,random,random"
    eval_games: int = 64
    win_metric: str = WIN_METRIC
    warm_start: NimWarmStart = chz.field(default_factory=NimWarmStart)

    env: NimConfig = chz.field(default_factory=NimConfig)
    """The rules and rewards (``env.pile_max=20``, ``env.illegal_reward=-2`` ...)."""

    def builder_class(self) -> type[NimDatasetBuilder]:
        from envs.nim.builders import NimDatasetBuilder

        return NimDatasetBuilder


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(NimTrainConfig, argv, prog="envs.nim.train")


if __name__ == "__main__":
    raise SystemExit(main())
