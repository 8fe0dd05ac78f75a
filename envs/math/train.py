"""Train a math solver: ``python -m envs.math.train [key=value ...]``.

With no arguments: the single-turn game on generated arithmetic (levels 1-2, offline) on the
local backend with the embedded SmolLM2-135M; 4 problems x 4 samples per step, 48 tokens per
answer, 20 steps, held-out evaluation on 32 generated test problems before training, after step
10 and at the end. Sized for 2 CPU cores.

Every key of :class:`training.Config` works (``learning_rate=3e-4``, ``max_steps=40``,
``backend=tinker``, ``log_path=...``), plus the game's keys below: ``env=feedback`` (up to
``max_attempts`` answers with feedback), ``env=calculator`` (a calculator tool),
``source=gsm8k path=data/gsm8k_{split}.jsonl``, ``levels=1,2,3,4``... ``--help`` lists them.
Artifacts go to ``log_path``; rerunning with the same ``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import chz

import training

if TYPE_CHECKING:
    from envs.math.builders import MathDatasetBuilder

WIN_METRIC = "math/correct"


@chz.chz
class MathTrainConfig(training.Config):
    """:class:`training.Config` with math defaults and the game's own keys."""

    # --- loop defaults for this env (2 CPU cores) -------------------------------------------
    log_path: str = "runs/math/default"
    max_tokens: int = 48
    max_steps: int = 20
    eval_every: int = 10
    eval_batches: int | None = 1
    win_metric: str = WIN_METRIC

    # --- the game -------------------------------------------------------------------------
    env: str = "single"
    """Game preset: ``single``, ``feedback`` or ``calculator``."""
    max_attempts: int | None = None
    """Answers per episode (default: the preset's, 1 or 3)."""
    attempt_decay: float = 0.5
    """A correct answer at attempt ``a`` earns ``attempt_decay ** (a - 1)``."""
    format_coef: float = 0.1
    """Weight of the format term ``format_coef * (1[boxed answer] - 1)``."""
    calculator: str | None = None
    """Override the calculator: ``off``, ``auto``, ``tool`` or ``tag``."""

    # --- data -----------------------------------------------------------------------------
    source: str = "generated"
    """``generated`` (offline), ``gsm8k``, ``math`` or ``jsonl``."""
    path: str | None = None
    """Local data file; ``{split}`` becomes ``train`` / ``test`` (None + gsm8k/math: the hub)."""
    test_path: str | None = None
    """Local test file, when it does not follow ``path``'s pattern."""
    levels: str = "1,2"
    """Generator difficulty levels (1-5, comma separated)."""
    n_train: int = 2000
    """Training problems (at most)."""
    n_test: int = 32
    """Held-out problems (at most)."""
    batch_size: int = 4
    """Problems (groups) per training step."""
    group_size: int = 4
    """Samples per problem (the GRPO group)."""

    @chz.validate
    def _check_game(self) -> None:
        from envs.math._keys import check_game_keys

        check_game_keys(self.env, self.calculator, self.source, self.levels)

    def dataset_builder(self) -> MathDatasetBuilder:
        """Train and held-out splits of the configured math game."""
        from envs.math.builders import MathDatasetBuilder

        return MathDatasetBuilder(
            batch_size=self.batch_size,
            group_size=self.group_size,
            env=self.env,
            max_attempts=self.max_attempts,
            format_coef=self.format_coef,
            attempt_decay=self.attempt_decay,
            calculator=self.calculator,
            source=self.source,
            path=self.path,
            test_path=self.test_path,
            levels=self.levels,
            n_train=self.n_train,
            n_test=self.n_test,
            renderer_name=self.renderer_name,
            model_name_for_tokenizer=self.model_name,
            seed=self.seed,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(MathTrainConfig, argv, prog="envs.math.train")


if __name__ == "__main__":
    raise SystemExit(main())
