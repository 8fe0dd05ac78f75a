"""A local stand-in for ``tinker.RestClient``: training runs and checkpoints read from the checkpoint root.

A local training run is a folder ``<root>/<model_id>/`` holding ``weights/<name>/`` and
``sampler_weights/<name>/`` checkpoints (see :mod:`backend.local._checkpoint`); its base model,
LoRA rank and user metadata (the cookbook stores ``renderer_name`` there) come from the newest
checkpoint's ``metadata.json``. Methods of ``tinker.RestClient`` about accounts, sessions,
billing or publishing have no local meaning and raise :class:`~backend.UnsupportedCallError`.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from tinker import types

from . import _checkpoint as ckpt
from ._errors import CheckpointNotFoundError
from ._futures import LocalFuture
from ._surface import TinkerSurface

_KIND_TO_TYPE: dict[str, types.CheckpointType] = {"weights": "training", "sampler_weights": "sampler"}


def _mtime(folder: Path) -> datetime:
    return datetime.fromtimestamp(folder.stat().st_mtime, tz=UTC)


class LocalRestClient(TinkerSurface):
    """``tinker.RestClient`` over the local checkpoint root (runs, checkpoints, deletion)."""

    _tinker_class = "RestClient"

    def __init__(self, root: Path) -> None:
        self.root = root

    # ---------------------------------------------------------------- helpers
    def _checkpoints(self, run_id: str) -> list[types.Checkpoint]:
        run = self.root / run_id
        out = []
        for kind, ctype in _KIND_TO_TYPE.items():
            for folder in sorted((run / kind).glob("*")) if (run / kind).is_dir() else []:
                if not (folder / ckpt.METADATA_FILE).is_file():
                    continue
                meta = ckpt.load_meta(folder)
                size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
                out.append(
                    types.Checkpoint(
                        checkpoint_id=f"{kind}/{folder.name}",
                        checkpoint_type=ctype,
                        time=_mtime(folder),
                        tinker_path=ckpt.make_path(run_id, kind, folder.name),
                        size_bytes=size,
                        user_metadata=meta.user_metadata or None,
                    )
                )
        return sorted(out, key=lambda c: c.time)

    def _run(self, run_id: str) -> types.TrainingRun:
        checkpoints = self._checkpoints(run_id)
        if not checkpoints:
            raise CheckpointNotFoundError(f"no local training run {run_id!r} under {self.root}")
        newest = ckpt.resolve(checkpoints[-1].tinker_path, self.root)
        meta = ckpt.load_meta(newest)
        training = [c for c in checkpoints if c.checkpoint_type == "training"]
        sampler = [c for c in checkpoints if c.checkpoint_type == "sampler"]
        return types.TrainingRun(
            training_run_id=run_id,
            base_model=meta.base_model,
            model_owner="local",
            is_lora=True,
            lora_rank=meta.rank,
            last_request_time=checkpoints[-1].time,
            last_checkpoint=training[-1] if training else None,
            last_sampler_checkpoint=sampler[-1] if sampler else None,
            user_metadata=dict(meta.user_metadata),
        )

    def _run_id_of(self, path: str) -> str:
        folder = ckpt.resolve(path, self.root)
        run_id = ckpt.load_meta(folder).run_id
        if not run_id:
            raise CheckpointNotFoundError(f"checkpoint {path!r} records no training run")
        return run_id

    # ---------------------------------------------------------------- runs
    def get_training_run(
        self, training_run_id: str, access_scope: str = "owned"
    ) -> LocalFuture[types.TrainingRun]:
        """The local training run ``training_run_id`` (a training client's ``model_id``)."""
        return LocalFuture.completed(self._run(training_run_id))

    async def get_training_run_async(
        self, training_run_id: str, access_scope: str = "owned"
    ) -> types.TrainingRun:
        """``await``-able :meth:`get_training_run`."""
        return self._run(training_run_id)

    def get_training_run_by_tinker_path(
        self, tinker_path: str, access_scope: str = "owned"
    ) -> LocalFuture[types.TrainingRun]:
        """The training run a ``local://`` checkpoint path belongs to."""
        return LocalFuture.completed(self._run(self._run_id_of(tinker_path)))

    async def get_training_run_by_tinker_path_async(
        self, tinker_path: str, access_scope: str = "owned"
    ) -> types.TrainingRun:
        """``await``-able :meth:`get_training_run_by_tinker_path`."""
        return self._run(self._run_id_of(tinker_path))

    def list_training_runs(
        self, limit: int = 20, offset: int = 0, access_scope: str = "owned", project_id: str | None = None
    ) -> LocalFuture[types.TrainingRunsResponse]:
        """Local training runs under the root, newest first."""
        ids = [p.name for p in self.root.iterdir() if p.is_dir()] if self.root.is_dir() else []
        runs = sorted(
            (self._run(i) for i in ids if self._checkpoints(i)),
            key=lambda r: r.last_request_time,
            reverse=True,
        )
        page = runs[offset : offset + limit]
        return LocalFuture.completed(
            types.TrainingRunsResponse(
                training_runs=page, cursor=types.Cursor(offset=offset, limit=limit, total_count=len(runs))
            )
        )

    # ---------------------------------------------------------------- checkpoints
    def list_checkpoints(self, training_run_id: str) -> LocalFuture[types.CheckpointsListResponse]:
        """The checkpoints (state and sampler) of a local training run, oldest first."""
        return LocalFuture.completed(
            types.CheckpointsListResponse(checkpoints=self._checkpoints(training_run_id))
        )

    async def list_checkpoints_async(self, training_run_id: str) -> types.CheckpointsListResponse:
        """``await``-able :meth:`list_checkpoints`."""
        return types.CheckpointsListResponse(checkpoints=self._checkpoints(training_run_id))

    def get_weights_info_by_tinker_path(self, tinker_path: str) -> LocalFuture[types.WeightsInfoResponse]:
        """Base model and LoRA settings of a checkpoint."""
        meta = ckpt.load_meta(ckpt.resolve(tinker_path, self.root))
        return LocalFuture.completed(
            types.WeightsInfoResponse(
                base_model=meta.base_model,
                is_lora=True,
                lora_rank=meta.rank,
                train_unembed=False,
                train_mlp=any(m in meta.target_modules for m in ("gate_proj", "up_proj", "down_proj")),
                train_attn=any(m in meta.target_modules for m in ("q_proj", "k_proj", "v_proj", "o_proj")),
            )
        )

    def delete_checkpoint_from_tinker_path(self, tinker_path: str) -> LocalFuture[None]:
        """Delete the checkpoint folder at ``tinker_path``."""
        shutil.rmtree(ckpt.resolve(tinker_path, self.root))
        return LocalFuture.completed(None)

    async def delete_checkpoint_from_tinker_path_async(self, tinker_path: str) -> None:
        """``await``-able :meth:`delete_checkpoint_from_tinker_path`."""
        self.delete_checkpoint_from_tinker_path(tinker_path).result()

    def delete_checkpoint(self, training_run_id: str, checkpoint_id: str) -> LocalFuture[None]:
        """Delete checkpoint ``checkpoint_id`` (``weights/<name>`` or ``sampler_weights/<name>``)."""
        return self.delete_checkpoint_from_tinker_path(f"{ckpt.CHECKPOINT_SCHEME}{training_run_id}/{checkpoint_id}")

    async def delete_checkpoint_async(self, training_run_id: str, checkpoint_id: str) -> None:
        """``await``-able :meth:`delete_checkpoint`."""
        self.delete_checkpoint(training_run_id, checkpoint_id).result()
