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
``env.sandbox.isolation=landlock``...; and the data keys (the dataset builder's names):
``data.source=gsm8k data.path=data/gsm8k_{split}.jsonl``, ``data.levels=1,2``... ``--help`` lists
them. Data files are validated before the model loads (one line, exit 2, nothing written). Artifacts go to
``log_path``; rerunning with the same ``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import chz

import training
from envs.code.config import CodeData, CodeEnvConfig
from envs.math.train import ProblemsTrainConfig

if TYPE_CHECKING:
    from envs.code.builders import CodeDatasetBuilder


@chz.chz
class CodeTrainConfig(ProblemsTrainConfig):
    """:class:`training.Config` with code-env loop defaults, the game (``env.*``) and the math
    env's data keys (:class:`envs.math.train.ProblemsTrainConfig`)."""

    log_path: str = "runs/code/default"
    max_tokens: int = 96
    data: CodeData = chz.field(default_factory=CodeData)
    """Where the problems come from and how many per step (``data.levels=1,2``...)."""

    env: CodeEnvConfig = chz.field(default_factory=CodeEnvConfig)
    """The game (``env.max_tool_calls=2``, ``env.sandbox.limits.timeout_s=2``...)."""

    def dataset_builder(self) -> CodeDatasetBuilder:
        """Train and held-out splits of the configured game."""
        from envs.code.builders import CodeDatasetBuilder

        return CodeDatasetBuilder(env=self.env, **self.data_keys())


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(CodeTrainConfig, argv, prog="envs.code.train")


if __name__ == "__main__":
    raise SystemExit(main())
