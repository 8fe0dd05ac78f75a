"""Cookbook builders for the code env: group builder, ``RLDataset`` and chz ``RLDatasetBuilder``.

The problems are the math env's (:func:`envs.math.load_split`: generated offline by default,
GSM8K, MATH or a JSONL file). Everything pickles: builders store the renderer *name*, the model
name and the configs; the sandbox and the grader are the process-wide ones of the process that
runs the envs. They run unchanged in ``tinker_cookbook.rl.train``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import chz
from tinker_cookbook.rl.types import Env, RLDataset, RLDatasetBuilder

from backend.model import SMOLLM2
from envs.code._keys import check_code_keys
from envs.code.env import CodeEnv, CodeEnvConfig, ToolFormat
from envs.code.sandbox import Isolation, SandboxConfig, SandboxLimits, sandbox_for
from envs.math.builders import MathGroupBuilder, MathRLDataset, load_split
from envs.math.data import MathProblem, Split
from renderers_ext import get_renderer

__all__ = ["CodeDatasetBuilder", "CodeGroupBuilder", "CodeRLDataset"]


@dataclass(frozen=True)
class CodeGroupBuilder(MathGroupBuilder):
    """``group_size`` code envs on the same problem (GRPO-style group)."""

    code_config: CodeEnvConfig = field(default_factory=CodeEnvConfig)
    """The code game (the inherited ``config`` is unused: :meth:`CodeEnvConfig.math_config`)."""

    async def make_envs(self) -> Sequence[Env]:
        renderer = get_renderer(self.renderer_name, self.model_name)
        sandbox = sandbox_for(self.code_config.sandbox)
        await sandbox.isolation()  # no isolation here: one clear error now, not at the first call
        return [
            CodeEnv(renderer, self.problem, self.code_config, sandbox=sandbox) for _ in range(self.group_size)
        ]


class CodeRLDataset(MathRLDataset):
    """Batches of :class:`CodeGroupBuilder` over math problems (see :class:`envs.math.MathRLDataset`).

    Args:
        problems: the problems.
        code_config: the game.
        **kwargs: :class:`envs.math.MathRLDataset` arguments (``batch_size``, ``group_size``...).
    """

    def __init__(self, problems: Sequence[MathProblem], *, code_config: CodeEnvConfig, **kwargs: object):
        super().__init__(problems, config=code_config.math_config(), **kwargs)  # type: ignore[arg-type]
        self.code_config = code_config

    def group(self, index: int) -> CodeGroupBuilder:
        """The group of problem ``index`` (in the dataset's order)."""
        math_group = super().group(index)
        return CodeGroupBuilder(
            math_group.problem,
            math_group.config,
            math_group.group_size,
            math_group.renderer_name,
            math_group.model_name,
            math_group.dataset_name,
            code_config=self.code_config,
        )


@chz.chz
class CodeDatasetBuilder(RLDatasetBuilder):
    """Train and test datasets of the code game (chz: every field is a command-line key)."""

    batch_size: int = 4
    """Groups per training batch."""
    group_size: int = 4
    """Envs per group (test groups have 1)."""
    max_attempts: int = 1
    """Answers per episode (more than 1: feedback after a wrong one)."""
    format_coef: float = 0.1
    """Weight of the format term."""
    attempt_decay: float = 0.5
    """Reward decay per extra attempt."""
    max_tool_calls: int = 4
    """Tool calls per episode."""
    failed_call_cost: float = 0.0
    """Reward subtracted per failed tool call."""
    output_chars: int = 1200
    """Characters of a run's output the model sees."""
    tool_format: str = "auto"
    """``auto``, ``tool`` (the renderer's tool calls) or ``tag`` (a fenced code block)."""
    fewshot: bool = True
    """Start with a solved example that calls the tool."""
    timeout_s: float = 5.0
    """Wall-clock (and CPU) limit of one run."""
    memory_mb: int = 512
    """Address-space limit of one run."""
    isolation: str = "auto"
    """``auto``, ``namespaces``, ``landlock`` or ``rlimits`` (unsafe; see ``envs.code.sandbox``)."""
    sandbox_concurrency: int = 2
    """Runs at once (per event loop)."""
    source: str = "generated"
    """``generated`` (offline default), ``gsm8k``, ``math`` or ``jsonl``."""
    path: str | None = None
    """Local data file; ``{split}`` is replaced by ``train`` / ``test``."""
    test_path: str | None = None
    """Local test file when it does not follow ``path``'s ``{split}`` pattern."""
    levels: str = "1,2,3,4,5"
    """Generator difficulty levels (comma separated)."""
    n_train: int = 2000
    """Training problems (at most)."""
    n_test: int = 64
    """Test problems (at most; 0: no test set)."""
    renderer_name: str = "qwen3_instruct"
    """Renderer name."""
    model_name_for_tokenizer: str = SMOLLM2
    """Model whose tokenizer the renderer uses."""
    seed: int = 0
    """Generator and shuffle seed."""

    @chz.validate
    def _check(self) -> None:
        check_code_keys(self.tool_format, self.isolation, self.source, self.levels)

    def env_config(self) -> CodeEnvConfig:
        """The game these fields describe."""
        sandbox = SandboxConfig(
            limits=SandboxLimits(timeout_s=self.timeout_s, memory_mb=self.memory_mb),
            isolation=Isolation(self.isolation),
            concurrency=self.sandbox_concurrency,
        )
        return CodeEnvConfig(
            format_coef=self.format_coef,
            max_attempts=self.max_attempts,
            attempt_decay=self.attempt_decay,
            max_tool_calls=self.max_tool_calls,
            failed_call_cost=self.failed_call_cost,
            output_chars=self.output_chars,
            tool_format=ToolFormat(self.tool_format),
            sandbox=sandbox,
            fewshot=self.fewshot,
        )

    def datasets(self) -> tuple[CodeRLDataset, CodeRLDataset | None]:
        """Build both splits synchronously."""
        config = self.env_config()
        renderer_name, model_name = self.renderer_name, self.model_name_for_tokenizer
        train_problems = load_split(
            self.source, Split.TRAIN, path=self.path, n=self.n_train, seed=self.seed, levels=self.levels
        )
        train = CodeRLDataset(
            train_problems,
            batch_size=self.batch_size,
            group_size=self.group_size,
            seed=self.seed,
            dataset_name=self.source,
            code_config=config,
            renderer_name=renderer_name,
            model_name=model_name,
        )
        if self.n_test <= 0:
            return train, None
        test_problems = load_split(
            self.source,
            Split.TEST,
            path=self.test_path or self.path,
            n=self.n_test,
            seed=self.seed,
            levels=self.levels,
        )
        test = CodeRLDataset(
            test_problems,
            batch_size=max(1, min(len(test_problems), 32)),
            group_size=1,
            shuffle=False,
            dataset_name=f"{self.source}_test",
            code_config=config,
            renderer_name=renderer_name,
            model_name=model_name,
        )
        return train, test

    async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
        return self.datasets()
