"""Train a math solver that runs Python: ``python -m envs.code.train [key=value ...]``.

With no arguments: generated arithmetic (levels 1-3, offline) with the ``run_python`` tool on the
local backend with the embedded SmolLM2-135M; 4 problems x 4 samples per step, up to 4 tool
calls and 96 tokens per turn, 20 steps, held-out evaluation on 32 generated test problems before
training, after step 10 and at the end. Every run goes through the sandbox
(``envs.code.sandbox``), at most 2 at once. Sized for 2 CPU cores.

Every key of :class:`training.Config` works (``learning_rate=3e-4``, ``max_steps=40``,
``backend=tinker``, ``log_path=...``), plus the game's keys below (``max_tool_calls=2``,
``timeout_s=2``, ``failed_call_cost=0.05``, ``tool_format=tag``, ``source=gsm8k
path=data/gsm8k_{split}.jsonl``...); ``--help`` lists them. Artifacts go to ``log_path``;
rerunning with the same ``log_path`` resumes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import chz

import training

if TYPE_CHECKING:
    from envs.code.builders import CodeDatasetBuilder

WIN_METRIC = "math/correct"


@chz.chz
class CodeTrainConfig(training.Config):
    """:class:`training.Config` with code-env defaults and the game's own keys."""

    # --- loop defaults for this env (2 CPU cores) -------------------------------------------
    log_path: str = "runs/code/default"
    max_tokens: int = 96
    max_steps: int = 20
    eval_every: int = 10
    eval_batches: int | None = 1
    win_metric: str = WIN_METRIC

    # --- the game -------------------------------------------------------------------------
    max_attempts: int = 1
    """Answers per episode (more than 1: feedback after a wrong one)."""
    attempt_decay: float = 0.5
    """A correct answer at attempt ``a`` earns ``attempt_decay ** (a - 1)``."""
    format_coef: float = 0.1
    """Weight of the format term ``format_coef * (1[boxed answer] - 1)``."""
    max_tool_calls: int = 4
    """``run_python`` calls per episode."""
    failed_call_cost: float = 0.0
    """Reward subtracted per failed call (an exception, a limit, a forbidden operation)."""
    output_chars: int = 1200
    """Characters of a run's output the model sees."""
    tool_format: str = "auto"
    """``auto``, ``tool`` (the renderer's tool calls) or ``tag`` (a fenced code block)."""
    fewshot: bool = True
    """Start with a solved example that calls the tool."""

    # --- the sandbox ----------------------------------------------------------------------
    timeout_s: float = 5.0
    """Wall-clock (and CPU) limit of one run."""
    memory_mb: int = 512
    """Address-space limit of one run."""
    isolation: str = "auto"
    """``auto``, ``namespaces``, ``landlock`` or ``rlimits`` (unsafe)."""
    sandbox_concurrency: int = 2
    """Runs at once."""

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
    def _check_game(self) -> None:
        from envs.code._keys import check_code_keys

        check_code_keys(self.tool_format, self.isolation, self.source, self.levels)

    def dataset_builder(self) -> CodeDatasetBuilder:
        """Train and held-out splits of the configured game."""
        from envs.code.builders import CodeDatasetBuilder

        return CodeDatasetBuilder(
            batch_size=self.batch_size,
            group_size=self.group_size,
            max_attempts=self.max_attempts,
            format_coef=self.format_coef,
            attempt_decay=self.attempt_decay,
            max_tool_calls=self.max_tool_calls,
            failed_call_cost=self.failed_call_cost,
            output_chars=self.output_chars,
            tool_format=self.tool_format,
            fewshot=self.fewshot,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
            isolation=self.isolation,
            sandbox_concurrency=self.sandbox_concurrency,
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
    return training.run_cli(CodeTrainConfig, argv, prog="envs.code.train")


if __name__ == "__main__":
    raise SystemExit(main())
