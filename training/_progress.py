"""Progress display: a rich progress bar on a terminal, one plain line per step otherwise.

The bar shows the step, the last reward, win rate and sampled tokens per second, and the
latest held-out win rate.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def _fmt(metrics: Mapping[str, Any], key: str, spec: str = ".3f") -> str:
    value = metrics.get(key)
    return format(value, spec) if isinstance(value, int | float) else "-"


def step_summary(step: int, metrics: Mapping[str, Any]) -> str:
    """One line describing a finished step."""
    return (
        f"step {step}: reward {_fmt(metrics, 'reward/mean')} win {_fmt(metrics, 'win_rate', '.2f')} "
        f"turns {_fmt(metrics, 'turns/mean', '.2f')} tok/s {_fmt(metrics, 'tokens/per_second', '.0f')} "
        f"kl {_fmt(metrics, 'optim/kl_sample_train_v2', '.2g')} "
        f"time {_fmt(metrics, 'time/step', '.1f')}s"
    )


class ProgressDisplay:
    """Shows training progress; use as a context manager.

    Args:
        total: number of steps of the run.
        start: first step of this invocation (non-zero on resume).
        enabled: False prints nothing at all.
    """

    def __init__(self, total: int, start: int = 0, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.console = Console(file=sys.stderr)
        self.live = enabled and self.console.is_terminal
        self._eval = "-"
        self._progress: Progress | None = None
        self._task: Any = None
        self.total = total
        self.start = start

    def __enter__(self) -> ProgressDisplay:
        if self.live:
            self._progress = Progress(
                TextColumn("[bold]{task.description:<9}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._progress.start()
            self._task = self._progress.add_task("train", total=self.total, completed=self.start, stats="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def phase(self, text: str) -> None:
        """Show what the loop is doing now (sampling, training, evaluating)."""
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def step_done(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Advance past ``step`` and show its metrics."""
        if not self.enabled:
            return
        stats = (
            f"reward {_fmt(metrics, 'reward/mean', '.2f')} win {_fmt(metrics, 'win_rate', '.2f')} "
            f"eval-win {self._eval} tok/s {_fmt(metrics, 'tokens/per_second', '.0f')}"
        )
        if self._progress is not None:
            self._progress.update(self._task, completed=step + 1, stats=stats)
        else:
            print(f"[{step + 1}/{self.total}] " + step_summary(step, metrics), file=sys.stderr, flush=True)

    def eval_done(self, step: int, metrics: Mapping[str, Any], figures: str = "") -> None:
        """Show the result of the evaluation after ``step`` training steps (``figures``: the env's
        own figures, already formatted)."""
        self._eval = _fmt(metrics, "eval/win_rate", ".2f")
        if not self.enabled:
            return
        line = (
            f"eval after {step} steps: win {self._eval} reward {_fmt(metrics, 'eval/reward/mean')} "
            f"turns {_fmt(metrics, 'eval/turns/mean', '.2f')} ({_fmt(metrics, 'eval/episodes', '.0f')} episodes)"
            + (f" {figures}" if figures else "")
        )
        if self._progress is not None:
            self._progress.console.print(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        """Print a line above the bar."""
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.console.print(text)
        else:
            print(text, file=sys.stderr, flush=True)
