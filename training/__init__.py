"""The RL training loop shared by every TurnGym env's ``train.py``.

Abstractions:

- :class:`Config`: the chz config (the command-line keys). An env subclasses it, overrides
  loop defaults, adds its game config as one nested field (``env.candidates=8``) and its data
  keys as another (``data.batch_size=8``: the dataset builder's fields under their own names),
  implements :meth:`Config.dataset_builder` and, with data files, :meth:`Config.check_data`.
  The protocol in full (scripted warm-start episodes, the held-out win, the stages a run
  reports): ``docs/training-protocol.md``.
- :func:`run_cli`: ``python -m envs.<env>.train key=value ...``; a bad key or value, or bad data,
  exits 2 with one line before the model loads (the loop is imported only after that), and so
  does an env whose tokenizer is not the policy's (before any sampling).
- :func:`run_pipeline_cli`: the same for a pipeline command (one config, one run, a summary:
  ``python -m envs.judge.rlhf``, ``envs.judge.preference``, ``envs.distill``).
- :class:`ConfigError`: those one-line errors.
- :func:`train` / :func:`train_async`: run or resume the loop (sample -> datums ->
  ``forward_backward`` + ``optim_step`` -> new sampler), on the local backend or Tinker.
- :class:`TrainSummary`: what a call did (steps, last held-out evaluation, run folder, and
  whether most steps trained on no datum: a run that learns nothing says so, see
  :data:`METRIC_NO_DATUM`).
- :class:`WarmStartConfig` (the ``warm_start.*`` keys of every train CLI) and
  :class:`SupportsScriptedEpisodes` (what an env's dataset builder implements to script the
  episodes a warm start trains on): a supervised warm start before RL, for any env.
- :data:`WarmStart`, :func:`supervised_warm_start`, :func:`sft_datum`: the lower-level hook run
  once on a fresh start, e.g. ``cross_entropy`` steps on hand-made datums before RL.

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
        env: MyGameConfig = chz.field(default_factory=MyGameConfig)  # light chz classes
        data: MyData = chz.field(default_factory=MyData)  # batch_size, group_size...

        def dataset_builder(self):
            from envs.my_env import MyDatasetBuilder  # heavy import: after parsing
            return MyDatasetBuilder(
                **chz.asdict(self.data),  # the builder's fields, under the same names
                env=self.env,
                model_name_for_tokenizer=self.model_name,
                renderer_name=self.renderer_name,
                seed=self.seed,
            )

    if __name__ == "__main__":
        raise SystemExit(training.run_cli(Config))

Every name is imported on first use (``lazy_loader``, names in ``__init__.pyi``), so
``import training`` costs nothing and a CLI rejects a bad key before the loop is imported.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)  # names: __init__.pyi
