"""Cookbook builders for the code env: group builder, ``RLDataset`` and chz ``RLDatasetBuilder``.

The problems are the math env's (:func:`envs.math.data.load_split`: generated offline by default,
GSM8K, MATH or a JSONL file). Everything pickles: builders store the model name, the renderer
*name* and the game config; the sandbox and the grader are the process-wide ones of the process
that runs the envs. They run unchanged in ``tinker_cookbook.rl.train``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import chz
from tinker_cookbook.rl.types import Env, RLDataset, RLDatasetBuilder

from backend.model import SMOLLM2
from envs.code.config import CodeEnvConfig
from envs.code.env import CodeEnv
from envs.code.sandbox import sandbox_for
from envs.math._keys import check_data_keys
from envs.math.builders import MathGroupBuilder, MathRLDataset
from envs.math.data import MathProblem, Split, load_split
from renderers_ext import load_renderer

__all__ = ["CodeDatasetBuilder", "CodeGroupBuilder", "CodeRLDataset"]


@dataclass(frozen=True)
class CodeGroupBuilder(MathGroupBuilder):
    """``group_size`` code envs on the same problem (GRPO-style group)."""

    code_config: CodeEnvConfig = field(default_factory=CodeEnvConfig)
    """The code game (the inherited ``config`` is its :meth:`CodeEnvConfig.math_config`)."""

    async def make_envs(self) -> Sequence[Env]:
        renderer = load_renderer(self.renderer_name, self.model_name_for_tokenizer)
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
        **kwargs: :class:`envs.math.MathRLDataset` arguments (``batch_size``, ``group_size``,
            ``model_name_for_tokenizer``, ``renderer_name``...).
    """

    def __init__(self, problems: Sequence[MathProblem], *, code_config: CodeEnvConfig, **kwargs: object):
        super().__init__(problems, config=code_config.math_config(), **kwargs)  # type: ignore[arg-type]
        self.code_config = code_config

    def group(self, index: int) -> CodeGroupBuilder:
        """The group of problem ``index`` (in the dataset's order)."""
        return CodeGroupBuilder(
            self.problems[index],
            self.config,
            self.group_size,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
            dataset_name=self.dataset_name,
            code_config=self.code_config,
        )


@chz.chz
class CodeDatasetBuilder(RLDatasetBuilder):
    """Train and test datasets of the code game (chz: every field is a key, the game nested as ``env``)."""

    batch_size: int = 4
    """Groups per training batch."""
    group_size: int = 4
    """Envs per group (test groups have 1)."""
    env: CodeEnvConfig = chz.field(default_factory=CodeEnvConfig)
    """The game (``env.max_tool_calls=2``, ``env.sandbox.limits.timeout_s=2``...)."""
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
    model_name_for_tokenizer: str = SMOLLM2
    """Model whose tokenizer the renderer uses."""
    renderer_name: str | None = None
    """Renderer name (None: the model's recommended one)."""
    seed: int = 0
    """Generator and shuffle seed."""

    @chz.validate
    def _check(self) -> None:
        check_data_keys(self.source, self.levels)

    def datasets(self) -> tuple[CodeRLDataset, CodeRLDataset | None]:
        """Build both splits synchronously."""
        common = dict(
            code_config=self.env,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
        )
        train_problems = load_split(
            self.source, Split.TRAIN, path=self.path, n=self.n_train, seed=self.seed, levels=self.levels
        )
        train = CodeRLDataset(
            train_problems,
            batch_size=self.batch_size,
            group_size=self.group_size,
            seed=self.seed,
            dataset_name=self.source,
            **common,  # type: ignore[arg-type]
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
            **common,  # type: ignore[arg-type]
        )
        return train, test

    async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
        return self.datasets()
