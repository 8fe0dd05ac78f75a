"""Cookbook builders for the code env: group builder, ``RLDataset`` and chz ``RLDatasetBuilder``.

The problems are the math env's (:func:`envs.math.data.load_split`: generated offline by default,
GSM8K, MATH or a JSONL file). Everything pickles: builders store the model name, the renderer
*name* and the game config; the sandbox and the grader are the process-wide ones of the process
that runs the envs. They run unchanged in ``tinker_cookbook.rl.train``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import chz
from tinker_cookbook.rl.types import Env

from envs.code.config import CodeEnvConfig
from envs.code.env import CodeEnv
from envs.code.sandbox import sandbox_for
from envs.math.builders import MathGroupBuilder, MathRLDataset, ProblemsDatasetBuilder
from envs.math.data import MathProblem
from renderers_ext import load_renderer

__all__ = ["CodeDatasetBuilder", "CodeGroupBuilder", "CodeRLDataset"]


@dataclass(frozen=True)
class CodeGroupBuilder(MathGroupBuilder):
    """``group_size`` code envs on the same problem (GRPO-style group)."""

    code_config: CodeEnvConfig = field(default_factory=CodeEnvConfig)
    """The code game (the inherited ``env`` is its :meth:`CodeEnvConfig.math_config`)."""

    async def make_envs(self) -> Sequence[Env]:
        renderer = load_renderer(self.renderer_name, self.model_name_for_tokenizer)
        sandbox = sandbox_for(self.code_config.sandbox)
        await sandbox.isolation()  # no isolation here: one clear error now, not at the first call
        return [
            CodeEnv(renderer, self.problem, self.code_config, sandbox=sandbox) for _ in range(self.group_size)
        ]


class CodeRLDataset(MathRLDataset):
    """Batches of :class:`CodeGroupBuilder` over math problems (see :class:`envs.math.builders.MathRLDataset`).

    Args:
        problems: the problems.
        code_config: the game.
        **kwargs: :class:`envs.math.builders.MathRLDataset` arguments (``batch_size``, ``group_size``,
            ``model_name_for_tokenizer``, ``renderer_name``...).
    """

    def __init__(self, problems: Sequence[MathProblem], *, code_config: CodeEnvConfig, **kwargs: object):
        super().__init__(problems, env=code_config.math_config(), **kwargs)  # type: ignore[arg-type]
        self.code_config = code_config

    def group(self, index: int) -> CodeGroupBuilder:
        """The group of problem ``index`` (in the dataset's order)."""
        return CodeGroupBuilder(
            self.problems[index],
            self.env,
            self.group_size,
            model_name_for_tokenizer=self.model_name_for_tokenizer,
            renderer_name=self.renderer_name,
            dataset_name=self.dataset_name,
            code_config=self.code_config,
        )


@chz.chz
class CodeDatasetBuilder(ProblemsDatasetBuilder):
    """Train and test datasets of the code game (chz: every field is a key, the game nested as
    ``env``; the data keys are the math env's, :class:`envs.math.ProblemsDatasetBuilder`)."""

    env: CodeEnvConfig = chz.field(default_factory=CodeEnvConfig)
    """The game (``env.max_tool_calls=2``, ``env.sandbox.limits.timeout_s=2``...)."""

    def dataset(self, problems: Sequence[MathProblem], **kwargs: Any) -> CodeRLDataset:
        """A :class:`CodeRLDataset` of ``problems`` with this game."""
        return CodeRLDataset(problems, code_config=self.env, **kwargs)
