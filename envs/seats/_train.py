"""The training config of a two-seat game: :class:`TwoSeatTrainConfig` (``training.Config`` with
the keys of :class:`~envs.seats.TwoSeatDatasetBuilder`), and the held-out figures per opponent
(:func:`score_figures`: win 1, draw 0.5, loss 0). Cheap to import."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import chz

import training
from envs.seats._models import opponent_tag

if TYPE_CHECKING:  # the builders import the model stack; parsing a command line must not
    from envs.seats._two_seat import TwoSeatDatasetBuilder


def score_figures(metrics: Mapping[str, Any], prefix: str, opponents: str) -> dict[str, float]:
    """``score_vs_<opponent>`` (win 1, draw 0.5, loss 0) per held-out opponent (a comma list) from
    the ``eval/env/vs_<opponent>/<prefix>/{win,draw}`` means, and the share of the policy's games
    that ended on its own illegal move (``illegal_rate``). A game without draws has no draw key."""
    out: dict[str, float] = {}
    for name in opponents.split(","):
        name = opponent_tag(name.strip())
        win = metrics.get(f"env/vs_{name}/{prefix}/win")
        draw = metrics.get(f"env/vs_{name}/{prefix}/draw", 0.0)
        if isinstance(win, int | float) and isinstance(draw, int | float):
            out[f"score_vs_{name}"] = float(win) + 0.5 * float(draw)
    illegal = metrics.get(f"env/all/{prefix}/illegal")
    if isinstance(illegal, int | float):
        out["illegal_rate"] = float(illegal)
    return out


@chz.chz
class TwoSeatTrainConfig(training.Config):
    """:class:`training.Config` with a two-seat game's data keys. A game subclasses it, adds its
    rules as a field ``env``, sets ``win_metric`` (``<game>/win``) and writes
    :meth:`builder_class` (a lazy import: parsing the command line stays fast)."""

    temperature: float = 1.0
    batch_size: int = 4
    """Groups per training step."""
    group_size: int = 8
    """Games per group (each self-play game gives a trajectory per seat)."""
    train_opponents: str = "self"
    """``self`` (self-play), a fixed opponent (``random``, ``optimal``; ``base``: the base model;
    ``checkpoint:<path>``: a frozen checkpoint, ``<path>`` a run folder, ``local://...`` under
    this run's checkpoints or ``tinker://...``), or a comma list drawn per game (several
    checkpoints: a pool of past checkpoints). A model opponent samples at ``eval_temperature``
    and never trains."""
    eval_opponents: str = "random,optimal"
    """The held-out games' fixed opponents (model opponents too; not ``self``)."""
    eval_games: int = 32
    """Held-out games per opponent (half in each seat)."""
    eval_seed: int = 0
    scripted_noise: float = 1.0
    """Warm start: how often the scripted player plays a random legal move instead of its best
    one (1: always, the format without the play; 0: the scripted player's own games)."""

    def builder_class(self) -> type[TwoSeatDatasetBuilder]:
        """The game's dataset builder (a subclass of :class:`TwoSeatDatasetBuilder` with ``env``)."""
        raise NotImplementedError(f"{type(self).__name__} must implement builder_class()")

    def eval_figures(self, metrics: Mapping[str, Any]) -> dict[str, float]:
        """``score_vs_<opponent>`` (win 1, draw 0.5, loss 0) per held-out opponent, and the share
        of the policy's games that ended on its illegal move (``illegal_rate``)."""
        return score_figures(metrics, self.win_metric.rsplit("/", 1)[0], self.eval_opponents)

    def check_data(self) -> None:
        """The opponents' names and checkpoint paths, before the model loads (one line)."""
        self.dataset_builder()

    def dataset_builder(self) -> TwoSeatDatasetBuilder:
        game: dict[str, Any] = {"env": getattr(self, "env")}  # noqa: B009 (the subclass's field)
        return self.builder_class()(
            **game,
            batch_size=self.batch_size,
            group_size=self.group_size,
            num_batches=max(1, self.max_steps),
            model_name_for_tokenizer=self.model_name,
            renderer_name=self.renderer_name,
            seed=self.seed,
            train_opponents=self.train_opponents,
            eval_opponents=self.eval_opponents,
            eval_games=self.eval_games,
            eval_seed=self.eval_seed,
            scripted_noise=self.scripted_noise,
            backend=self.backend,
            base_url=self.base_url,
            checkpoint_root=str(Path(self.log_path) / "checkpoints"),
            opponent_max_tokens=self.max_tokens,
            opponent_temperature=self.eval_temperature,
        )
