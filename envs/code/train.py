"""Train a math solver that runs Python: ``python -m envs.code.train [key=value ...]``.

With no arguments: generated arithmetic (levels 1-3, offline) with the ``run_python`` tool on the
local backend with the embedded SmolLM2-135M; 4 problems x 4 samples per step, up to 4 tool
calls and 96 tokens per turn, 20 steps, held-out evaluation on 32 generated test problems before
training, after step 10 and at the end. Every run goes through the sandbox
(``envs.code.sandbox``), at most 2 at once. Sized for 2 CPU cores.

Every key of :class:`training.Config` works (``learning_rate=3e-4``, ``max_steps=40``,
``backend=tinker``, ``model_name=...``, ``log_path=...``), every field of the game
(:class:`~envs.code.config.CodeEnvConfig`) as a nested key: ``env.max_tool_calls=2``,
``env.failed_call_cost=0.05``, ``env.tool_format=tag``, ``env.sandbox.limits.timeout_s=2``,
``env.sandbox.isolation=landlock``...; and the data keys below: ``source=gsm8k
path=data/gsm8k_{split}.jsonl``, ``levels=1,2``... ``--help`` lists them. Data files are
validated before the model loads (one line, exit 2, nothing written). Artifacts go to
``log_path``; rerunning with the same ``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import chz

import training
from envs.code.config import CodeEnvConfig

if TYPE_CHECKING:
    from envs.code.builders import CodeDatasetBuilder

WIN_METRIC = "math/correct"


@chz.chz
class CodeTrainConfig(training.Config):
    """:class:`training.Config` with code-env loop defaults, the game (``env.*``) and its data keys."""

    # --- loop defaults for this env (2 CPU cores) -------------------------------------------
    log_path: str = "runs/code/default"
    max_tokens: int = 96
    max_steps: int = 20
    eval_every: int = 10
    eval_batches: int | None = 1
    win_metric: str = WIN_METRIC

    # --- the game (its own defaults, nested keys env.<field>) --------------------------------
    env: CodeEnvConfig = chz.field(default_factory=CodeEnvConfig)
    """The game (``env.max_tool_calls=2``, ``env.sandbox.limits.timeout_s=2``...)."""

    # --- data -----------------------------------------------------------------------------
    source: str = "generated"
    """``generated`` (offline), ``gsm8k``, ``math`` or ``jsonl``."""
    path: str | None = None
    """Local data file; ``{split}`` becomes ``train`` / ``test`` (None + gsm8k/math: the hub)."""
    test_path: str | None = None
    """Local test file, when it does not follow ``path``'s pattern."""
    levels: str = "1,2,3"
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
    def _check_data_keys(self) -> None:
        from envs.math._keys import check_data_keys

        check_data_keys(self.source, self.levels)

    def check_data(self) -> None:
        """The data files exist and their rows parse, with an answer (before the model loads)."""
        from envs.math.data import check_source

        check_source(
            self.source, self.path, test_path=self.test_path, n_train=self.n_train, n_test=self.n_test
        )

    def dataset_builder(self) -> CodeDatasetBuilder:
        """Train and held-out splits of the configured game."""
        from envs.code.builders import CodeDatasetBuilder

        return CodeDatasetBuilder(
            batch_size=self.batch_size,
            group_size=self.group_size,
            env=self.env,
            source=self.source,
            path=self.path,
            test_path=self.test_path,
            levels=self.levels,
            n_train=self.n_train,
            n_test=self.n_test,
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            seed=self.seed,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(CodeTrainConfig, argv, prog="envs.code.train")


if __name__ == "__main__":
    raise SystemExit(main())
