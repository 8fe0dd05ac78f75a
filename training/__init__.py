"""The RL training loop shared by every TurnGym env's ``train.py``.

Abstractions:

- :class:`Config`: one flat chz config (the command-line keys). An env subclasses it, adds its
  own fields, overrides defaults and implements :meth:`Config.dataset_builder`.
- :func:`run_cli`: ``python -m envs.<env>.train key=value ...``; a bad key or value exits 2
  with one line in well under a second (the loop is imported only after parsing).
- :func:`train` / :func:`train_async`: run or resume the loop (sample -> datums ->
  ``forward_backward`` + ``optim_step`` -> new sampler), on the local backend or Tinker.
- :class:`RunSummary`: what a call did (steps, last held-out evaluation, run folder).
- :data:`WarmStart`, :func:`supervised_warm_start`, :func:`sft_datum`: an optional hook run once
  on a fresh start, e.g. ``cross_entropy`` steps on scripted transcripts before RL.

Run folder (``log_path``): ``config.json``, ``metrics.jsonl`` (one row per step),
``eval.jsonl`` (held-out rows, ``eval/`` prefix, ``step`` = updates so far),
``reward_curve.png``, ``transcripts/eval_stepNNNN.html``, ``checkpoints.jsonl`` (+ the states),
``train.log``. Rerunning with the same ``log_path`` resumes from the last checkpoint.

A minimal env ``train.py``::

    import chz
    import training

    @chz.chz
    class Config(training.Config):
        log_path: str = "runs/my_env"
        group_size: int = 8

        def dataset_builder(self):
            from envs.my_env import MyDatasetBuilder  # heavy import: after parsing
            return MyDatasetBuilder(group_size=self.group_size, model_name=self.model_name)

    if __name__ == "__main__":
        raise SystemExit(training.run_cli(Config))

Only :mod:`training._config` and :mod:`training._cli` are imported eagerly; the loop's
names are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from training._cli import ConfigError, parse_config, run_cli
from training._config import BackendName, ComputeDtype, Config, LossFnName, LRSchedule

if TYPE_CHECKING:
    from training._loop import RunFolderError, RunSummary, WarmStart, train, train_async
    from training._metrics import group_metrics
    from training._plot import plot_reward_curve
    from training._warm_start import sft_datum, supervised_warm_start

_LAZY = {
    "RunFolderError": "training._loop",
    "RunSummary": "training._loop",
    "WarmStart": "training._loop",
    "train": "training._loop",
    "train_async": "training._loop",
    "group_metrics": "training._metrics",
    "plot_reward_curve": "training._plot",
    "sft_datum": "training._warm_start",
    "supervised_warm_start": "training._warm_start",
}

__all__ = [
    "BackendName",
    "ComputeDtype",
    "Config",
    "ConfigError",
    "LRSchedule",
    "LossFnName",
    "RunFolderError",
    "RunSummary",
    "WarmStart",
    "group_metrics",
    "parse_config",
    "plot_reward_curve",
    "run_cli",
    "sft_datum",
    "supervised_warm_start",
    "train",
    "train_async",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'training' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
