"""Train a math solver: ``python -m envs.math.train [key=value ...]``.

With no arguments: the single-turn game on generated arithmetic (levels 1-2, offline) on the
local backend with the embedded SmolLM2-135M; 4 problems x 4 samples per step, 48 tokens per
answer, 20 steps, held-out evaluation on 32 generated test problems before training, after step
10 and at the end. Sized for 2 CPU cores.

Every key of :class:`training.Config` works (``learning_rate=3e-4``, ``max_steps=40``,
``backend=tinker``, ``model_name=...``, ``log_path=...``), every field of the game
(:class:`~envs.math.config.MathEnvConfig`) as a nested key: ``env.max_attempts=3`` (the
feedback game: answers with "try again" feedback), ``env.calculator=auto`` (a calculator tool),
``env.format_coef=0.2``, ``env.fewshot=false``...; and the data keys below:
``data.source=gsm8k data.path=data/gsm8k_{split}.jsonl``, ``data.levels=1,2,3,4``... (the dataset
builder's own names; ``--help`` lists them).
Data files are validated before the model loads (a missing file, a malformed line or a row
without its answer: one line, exit 2, nothing written). Artifacts go to ``log_path``; rerunning
with the same ``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import chz

import training
from envs.math.config import MathEnvConfig, ProblemsData

if TYPE_CHECKING:
    from envs.math.builders import MathDatasetBuilder

WIN_METRIC = "math/correct"


@chz.chz
class ProblemsTrainConfig(training.Config):
    """:class:`training.Config` with the data keys of an env served math problems (the math env,
    the code env) and their check before the model loads; a subclass adds its game (``env``) and
    :meth:`dataset_builder`."""

    # --- loop defaults for these envs (2 CPU cores) -----------------------------------------
    max_steps: int = 20
    eval_every: int = 10
    eval_batches: int | None = 1
    win_metric: str = WIN_METRIC

    # --- data: the dataset builder's keys (nested keys data.<field>) -----------------------
    data: ProblemsData = chz.field(default_factory=ProblemsData)
    """Where the problems come from and how many per step (``data.source=gsm8k``,
    ``data.levels=1,2,3``, ``data.batch_size=8``...)."""

    def check_data(self) -> None:
        """The data files exist and their rows parse, with an answer (before the model loads)."""
        from envs.math.data import check_source

        d = self.data
        check_source(d.source, d.path, test_path=d.test_path, n_train=d.n_train, n_test=d.n_test)

    def data_keys(self) -> dict[str, Any]:
        """The fields of :class:`envs.math.ProblemsDatasetBuilder`: the data keys under their own
        names, and the policy's model, renderer and seed."""
        return dict(
            **chz.asdict(self.data),
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            seed=self.seed,
        )


@chz.chz
class MathTrainConfig(ProblemsTrainConfig):
    """:class:`training.Config` with math loop defaults, the game (``env.*``) and its data keys."""

    log_path: str = "runs/math/default"
    max_tokens: int = 48

    env: MathEnvConfig = chz.field(default_factory=MathEnvConfig)
    """The game (``env.max_attempts=3``, ``env.calculator=auto``...)."""

    def dataset_builder(self) -> MathDatasetBuilder:
        """Train and held-out splits of the configured math game."""
        from envs.math.builders import MathDatasetBuilder

        return MathDatasetBuilder(env=self.env, **self.data_keys())


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(MathTrainConfig, argv, prog="envs.math.train")


if __name__ == "__main__":
    raise SystemExit(main())
