"""Train a policy on LLM-judged prompts: ``python -m envs.judge.train [key=value ...]``.

With no arguments: the rubric-judge env on the local backend, offline, with the embedded
SmolLM2-135M as both policy and judge. The shipped prompt set (``envs/judge/data/prompts.jsonl``,
single-turn questions) and rubrics (``rubrics.json``: correct x2, concise, clear; scores 0-10);
4 prompts held out. Sized for 2 CPU cores: 2 prompts x 4 answers per step, 24 tokens per answer,
the judge's reply is prefilled with ``Score: `` (``Preferred: `` for pairwise) and it writes at most 3 more tokens, 4 samples
at temperature 1 averaged (a 135M judge's greedy verdict is nearly always ``10``), within 300 s
(2 attempts, then reward 0, counted under ``judge/fallback``), 3 steps, evaluation before training and at the end. Expect a few minutes;
a 135M judge is a weak grader, so this run shows the machinery, not learning.

Every key of :class:`training.Config` works (``max_steps=20``, ``backend=tinker``, ``log_path=...``)
plus the keys below: ``kind=pairwise`` (group reward = win rate, ``pattern=both_orders|all_pairs|
round_robin``), ``multi_turn=true`` (the persona tasks: a simulated user answers once, then the judge
grades; a truncated turn ends the chat and is judged as it is, unless ``on_truncation=continue``:
the 135M policy rambles past ``max_tokens``, so try ``multi_turn=true on_truncation=continue``), ``judge=openai:<model> judge_base_url=http://host:8000/v1`` or
``judge=tinker:<model>`` for a real judge, ``judge_cache_path=runs/judge/cache.sqlite`` to
persist verdicts. Artifacts go to ``log_path``; rerunning with the same ``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import chz

import training
from backend.model import SMOLLM2

if TYPE_CHECKING:
    from envs.judge import JudgeDatasetBuilder


@chz.chz
class JudgeTrainConfig(training.Config):
    """:class:`training.Config` with judge-env defaults and the judge's own keys (flat)."""

    # --- loop defaults for this env (a few minutes on 2 CPU cores) --------------------------
    log_path: str = "runs/judge/default"
    max_tokens: int = 24
    max_steps: int = 3
    eval_every: int = 3
    eval_batches: int | None = 1
    transcripts_per_eval: int = 2

    # --- the env --------------------------------------------------------------------------
    kind: str = "rubric"
    """``rubric`` (reward = normalised judge score) or ``pairwise`` (reward = win rate in the group)."""
    tasks_path: str = ""
    """JSONL prompts (empty: the shipped set)."""
    rubrics_path: str = ""
    """JSON rubrics (empty: the shipped ones)."""
    batch_size: int = 2
    """Prompts (groups) per step."""
    group_size: int = 4
    """Answers per prompt (the GRPO group)."""
    n_test: int = 4
    """Prompts held out for evaluation."""
    test_group_size: int = 2
    """Answers per held-out prompt."""
    epochs: int = 1
    """Passes over the training prompts."""
    multi_turn: bool = False
    """Include the persona tasks as multi-turn chats with a simulated user (slower)."""
    pattern: str = "both_orders"
    """Pairwise tournament: ``both_orders``, ``all_pairs`` or ``round_robin``."""
    rounds: int = 1
    """Neighbours each answer meets under ``round_robin``."""
    on_truncation: str = "judge"
    """A turn cut by ``max_tokens``: ``judge`` (the chat ends and is judged) or ``continue``."""

    # --- the judge ------------------------------------------------------------------------
    judge: str = f"local:{SMOLLM2}"
    """Judge spec: ``local:<model>``, ``tinker:<model>``, ``openai:<model>`` or a registered kind."""
    judge_max_tokens: int = 3
    """Tokens of a judge reply (after the prefix)."""
    judge_reply_prefix: str | None = None
    """``local``/``tinker`` judges: the reply is prefilled with this, so a small judge only writes
    the verdict (None: ``"Score: "`` for ``rubric``, ``"Preferred: "`` for ``pairwise``; empty: no prefill)."""
    judge_temperature: float = 1.0
    """Judge sampling temperature."""
    judge_samples: int = 4
    """Judge replies per verdict, averaged (a small judge's single greedy reply is nearly constant)."""
    judge_timeout_s: float = 300.0
    """Deadline of one judge call."""
    judge_max_attempts: int = 2
    """Judge calls before the fallback reward."""
    judge_max_concurrency: int = 16
    """Judge calls in flight."""
    judge_fallback_reward: float = 0.0
    """Reward when the judge fails (errors, timeouts, unparseable replies)."""
    judge_cache_path: str | None = None
    """SQLite file persisting verdicts across runs (None: in memory)."""
    judge_base_url: str | None = None
    """Endpoint of an ``openai`` judge (or a Tinker URL)."""
    judge_api_key_env: str = "OPENAI_API_KEY"
    """Environment variable with the ``openai`` judge's key."""
    user: str = ""
    """Simulated-user spec for multi-turn tasks (empty: the judge's model at temperature 1)."""
    user_max_tokens: int = 24
    """Tokens of a simulated-user reply."""

    @chz.validate
    def _check_judge(self) -> None:
        if self.kind not in ("rubric", "pairwise"):
            raise ValueError(f"kind must be 'rubric' or 'pairwise', got {self.kind!r}")
        if self.pattern not in ("both_orders", "all_pairs", "round_robin"):
            raise ValueError(f"pattern must be both_orders, all_pairs or round_robin, got {self.pattern!r}")
        if self.on_truncation not in ("judge", "continue"):
            raise ValueError(f"on_truncation must be 'judge' or 'continue', got {self.on_truncation!r}")
        if self.batch_size < 1 or self.group_size < 1:
            raise ValueError(
                f"batch_size and group_size must be >= 1, got {self.batch_size}, {self.group_size}"
            )
        if self.kind == "pairwise" and self.group_size < 2:
            raise ValueError(f"pairwise needs group_size >= 2, got {self.group_size}")

    def reply_prefix(self) -> str:
        """The judge's reply prefill for :attr:`kind`."""
        if self.judge_reply_prefix is not None:
            return self.judge_reply_prefix
        return "Preferred: " if self.kind == "pairwise" else "Score: "

    def dataset_builder(self) -> JudgeDatasetBuilder:
        """Train and held-out splits of the judge env."""
        from envs.judge import (
            DATA_DIR,
            JudgeConfig,
            JudgeDatasetBuilder,
            JudgeEnvKind,
            OnTruncation,
            TournamentPattern,
            UserConfig,
        )

        judge = JudgeConfig(
            self.judge,
            max_concurrency=self.judge_max_concurrency,
            timeout_s=self.judge_timeout_s,
            max_attempts=self.judge_max_attempts,
            fallback_reward=self.judge_fallback_reward,
            cache_path=self.judge_cache_path,
            max_tokens=self.judge_max_tokens,
            temperature=self.judge_temperature,
            base_url=self.judge_base_url,
            api_key_env=self.judge_api_key_env,
            reply_prefix=self.reply_prefix(),
            samples=self.judge_samples,
        )
        user = UserConfig(
            model=judge.replace(
                completer=self.user or self.judge,
                cache=False,
                temperature=1.0,
                max_tokens=self.user_max_tokens,
            )
        )
        return JudgeDatasetBuilder(
            kind=JudgeEnvKind(self.kind),
            tasks_path=self.tasks_path or str(DATA_DIR / "prompts.jsonl"),
            rubrics_path=self.rubrics_path or str(DATA_DIR / "rubrics.json"),
            judge=judge,
            user=user,
            batch_size=self.batch_size,
            group_size=self.group_size,
            test_group_size=self.test_group_size,
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            pattern=TournamentPattern(self.pattern),
            rounds=self.rounds,
            n_test=self.n_test,
            epochs=self.epochs,
            multi_turn=self.multi_turn,
            on_truncation=OnTruncation(self.on_truncation),
            seed=self.seed,
        )


def main(argv: list[str] | None = None) -> int:
    """Parse ``key=value`` arguments and train; returns the exit status."""
    return training.run_cli(JudgeTrainConfig, argv, prog="envs.judge.train")


if __name__ == "__main__":
    raise SystemExit(main())
