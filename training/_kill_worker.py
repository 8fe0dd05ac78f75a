"""A test double for rollout executors: a group builder that kills the worker building it, once
(``training.testing.KillWorkerOnce``; importable by module path in every worker)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tinker_cookbook.rl.types import Env, EnvGroupBuilder


class KillWorkerOnce(EnvGroupBuilder):
    """A group builder that SIGKILLs the worker process building it, once: the first
    ``make_envs`` outside the trainer's process (``trainer_pid``) that finds no ``marker`` file
    creates it and kills its own process; every other call builds ``inner``'s envs. Tests and
    ``bench/executor.py`` use it to kill rollout workers mid-batch, deterministically."""

    def __init__(self, inner: EnvGroupBuilder, marker: str, trainer_pid: int) -> None:
        self.inner, self.marker, self.trainer_pid = inner, marker, trainer_pid

    async def make_envs(self) -> Sequence[Env]:
        """``inner``'s envs (after killing this worker, the first time)."""
        import os
        import signal
        from pathlib import Path

        if os.getpid() != self.trainer_pid and not Path(self.marker).exists():
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return await self.inner.make_envs()

    async def compute_group_rewards(self, trajectory_group: Any, env_group: Sequence[Env]) -> Any:
        """``inner``'s group rewards."""
        return await self.inner.compute_group_rewards(trajectory_group, env_group)

    async def cleanup(self) -> None:
        """``inner``'s cleanup."""
        await self.inner.cleanup()

    def logging_tags(self) -> list[str]:
        """``inner``'s tags."""
        return self.inner.logging_tags()
