"""The experiment trackers users already run (W&B, and the cookbook's other loggers), through the
cookbook's ``ml_log`` as its trainers log.

``wandb_project=`` turns them on: ``ml_log.setup_logging`` builds its loggers (W&B; Neptune and
Trackio too when installed, under the same project and name, as in the cookbook), and the loop
hands each ``metrics.jsonl`` / ``eval.jsonl`` row to them with its step and its metric names
unchanged. The cookbook's JSON and console loggers are left out: the run folder's own
``metrics.jsonl`` (durable, truncated on resume) and the progress display do those jobs. ``wandb``
is an optional extra (``pip install 'turngym[wandb]'``); ``WANDB_MODE=offline`` logs without a
network, into ``<log_path>/wandb/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["Trackers"]


class Trackers:
    """The run's trackers (none unless ``wandb_project`` is set); closing is idempotent."""

    def __init__(self, wandb_project: str | None, wandb_name: str | None, log_path: Path, config: Any) -> None:
        self.logger: Any = None
        if not wandb_project:
            return
        from tinker_cookbook.utils import ml_log

        try:
            import wandb  # noqa: F401
        except ImportError:
            raise RuntimeError(
                "wandb_project is set but wandb is not installed: pip install 'turngym[wandb]' (or wandb)"
            ) from None
        logger: Any = ml_log.setup_logging(
            str(log_path), wandb_project=wandb_project, wandb_name=wandb_name, do_configure_logging_module=False
        )
        logger.loggers = [
            lg for lg in logger.loggers if not isinstance(lg, ml_log.JsonLogger | ml_log.PrettyPrintLogger)
        ]
        logger.log_hparams(config)
        self.logger = logger

    def log(self, step: int, row: Mapping[str, Any]) -> None:
        """Log one row (its ``step`` key is the step, the rest the metrics, names unchanged)."""
        if self.logger is not None:
            self.logger.log_metrics({k: v for k, v in row.items() if k != "step"}, step=step)

    def url(self) -> str | None:
        """Where the run shows (e.g. its W&B page), when a tracker says."""
        return self.logger.get_logger_url() if self.logger is not None else None

    def close(self) -> None:
        """Finish every tracker's run."""
        if self.logger is not None:
            self.logger.close()
            self.logger = None
