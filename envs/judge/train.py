"""Train a policy on LLM-judged prompts: ``python -m envs.judge.train [key=value ...]``.

With no arguments: the rubric-judge env on the local backend, offline, with the embedded
SmolLM2-135M as both policy and judge. The shipped prompt set (``envs/judge/data/prompts.jsonl``,
single-turn questions) and rubrics (``rubrics.json``: correct x2, concise, clear; scores 0-10);
4 prompts held out. Sized for 2 CPU cores: 2 prompts x 4 answers per step, 24 tokens per answer,
the default judge (:data:`~envs.judge.config.SMALL_LOCAL_JUDGE`: the reply prefilled with
``Score: ``, ``Preferred: `` for pairwise, at most 3 more tokens, 4 samples at temperature 1
averaged because a 135M judge's greedy verdict is nearly always ``10``, within 300 s, 2 attempts,
then reward 0, counted under ``judge/fallback``), 3 steps, evaluation before training and at the
end. Expect a few minutes; a 135M judge is a weak grader, so this run shows the machinery, not
learning.

Every key of :class:`training.Config` works (``max_steps=20``, ``backend=tinker``, ``log_path=...``),
the game as nested ``env.*`` keys (:class:`~envs.judge.config.JudgeEnvConfig`): ``env.kind=pairwise``
(group reward = win rate, ``env.pattern=both_orders|all_pairs|round_robin``), ``env.multi_turn=true``
(the persona tasks: a simulated user answers once, then the judge grades; a truncated turn ends
the chat and is judged as it is, unless ``env.on_truncation=continue``: the 135M policy rambles
past ``max_tokens``, so try ``env.multi_turn=true env.on_truncation=continue``), the judge as
nested ``judge.*`` keys (:class:`~envs.judge.config.JudgeConfig`): ``judge.cache_path=runs/judge/cache.sqlite``
persists verdicts, and a real judge takes the plain config's budget, e.g.
``judge=envs.judge.config:JudgeConfig judge.completer=openai:<model> judge.base_url=http://host:8000/v1``
or ``judge.completer=tinker:<model>``; and the data keys below. The task and rubric files are
checked before the model loads (one line, exit 2, nothing written). Artifacts go to ``log_path``;
rerunning with the same ``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import chz

import training
from envs.judge.config import SMALL_LOCAL_JUDGE, JudgeConfig, JudgeData, JudgeEnvConfig, JudgeEnvKind

if TYPE_CHECKING:
    from envs.judge import JudgeDatasetBuilder


@chz.chz
class JudgeTrainConfig(training.Config):
    """:class:`training.Config` with judge-env loop defaults, the game (``env.*``), the judge
    (``judge.*``) and the data keys."""

    # --- loop defaults for this env (a few minutes on 2 CPU cores) --------------------------
    log_path: str = "runs/judge/default"
    max_tokens: int = 24
    max_steps: int = 3
    eval_every: int = 3
    eval_batches: int | None = 1
    transcripts_per_eval: int = 2

    # --- the game and its judge (their own defaults, nested keys) ---------------------------
    env: JudgeEnvConfig = chz.field(default_factory=JudgeEnvConfig)
    """The game (``env.kind=pairwise``, ``env.multi_turn=true``...)."""
    judge: JudgeConfig = chz.field(default_factory=SMALL_LOCAL_JUDGE, blueprint_unspecified=SMALL_LOCAL_JUDGE)
    """Who grades (``judge.completer=...``, ``judge.timeout_s=60``...)."""

    # --- data: the dataset builder's keys (nested keys data.<field>) -----------------------
    data: JudgeData = chz.field(default_factory=JudgeData)
    """Prompts per step, answers per prompt, held-out prompts (``data.batch_size=4``...)."""

    @chz.validate
    def _check_groups(self) -> None:
        if self.env.kind == JudgeEnvKind.PAIRWISE and self.data.group_size < 2:
            raise ValueError(f"pairwise needs data.group_size >= 2, got {self.data.group_size}")

    def check_data(self) -> None:
        """The task and rubric files parse and every task's rubric exists (before the model loads)."""
        from envs.judge.tasks import check_files  # standard library only: no tinker, no torch

        check_files(self.env.tasks_file, self.env.rubrics_file)

    def dataset_builder(self) -> JudgeDatasetBuilder:
        """Train and held-out splits of the judge env."""
        from envs.judge import JudgeDatasetBuilder

        return JudgeDatasetBuilder(
            env=self.env,
            judge=self.judge,
            **chz.asdict(self.data),
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            seed=self.seed,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(JudgeTrainConfig, argv, prog="envs.judge.train")


if __name__ == "__main__":
    raise SystemExit(main())
