"""Resumable checkpoints: training state (weights + optimizer) plus the loop's own state.

``checkpoints.jsonl`` in the run folder lists the checkpoints, one JSON record per line, in the
cookbook's format (``name``, ``batch`` = the next step to run, ``state_path``, optional
``sampler_path``) plus ``rng_path``: a pickle of the Python, NumPy and torch RNG states. A record
is appended only after the state and the RNG file are written, so the last complete record is
always loadable; the data cursor is the step itself (batch ``i`` of the dataset is a pure
function of ``i``).

On the local backend the states live under ``<log_path>/checkpoints`` and only the newest
``keep_last`` resumable ones are kept on disk; Tinker-cloud checkpoints
expire with their TTL.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training._logging import read_rows

CHECKPOINTS_FILE = "checkpoints.jsonl"
CHECKPOINT_DIR = "checkpoints"
LOCAL_SCHEME = "local://"


@dataclass(frozen=True)
class CheckpointRecord:
    """One line of ``checkpoints.jsonl``."""

    name: str
    """Checkpoint name (``%06d`` of :attr:`batch`, or ``final``)."""
    batch: int
    """The next step to run when resuming from this checkpoint."""
    state_path: str
    """``save_state`` path (weights + optimizer): ``local://...`` or ``tinker://...``."""
    rng_path: str
    """Pickle of the RNG states, relative to the run folder."""
    sampler_path: str | None = None
    """``save_weights_for_sampler`` path, when one was saved (final checkpoint)."""
    time: float = 0.0
    """Unix time of the save."""

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def rng_state() -> dict[str, Any]:
    """The Python, NumPy and torch RNG states."""
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore states captured by :func:`rng_state`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def seed_everything(seed: int) -> None:
    """Seed the Python, NumPy and torch RNGs."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def load_records(log_path: Path) -> list[CheckpointRecord]:
    """Every complete record of ``checkpoints.jsonl`` (cookbook-only records are skipped)."""
    out = []
    for row in read_rows(log_path / CHECKPOINTS_FILE):
        if "state_path" in row and "batch" in row and "rng_path" in row:
            fields = CheckpointRecord.__dataclass_fields__
            out.append(CheckpointRecord(**{k: v for k, v in row.items() if k in fields}))
    return out


def last_checkpoint(log_path: Path) -> CheckpointRecord | None:
    """The newest record whose RNG file exists (the state itself is checked by the backend)."""
    for record in reversed(load_records(log_path)):
        if (log_path / record.rng_path).is_file():
            return record
    return None


def local_folder(state_path: str, root: Path) -> Path | None:
    """The folder of a ``local://<relative>`` checkpoint under ``root`` (None for other paths)."""
    if not state_path.startswith(LOCAL_SCHEME):
        return None
    rest = state_path[len(LOCAL_SCHEME) :]
    return Path(rest) if rest.startswith("/") else root / rest


async def save_checkpoint(
    training_client: Any,
    log_path: Path,
    *,
    batch: int,
    name: str | None = None,
    with_sampler: bool = False,
    ttl_seconds: int | None = None,
) -> CheckpointRecord:
    """Save weights + optimizer (and sampler weights if asked) and append the record."""
    name = name or f"{batch:06d}"
    state_future = await training_client.save_state_async(name, ttl_seconds=ttl_seconds, overwrite=True)
    sampler_future = (
        await training_client.save_weights_for_sampler_async(name, ttl_seconds=ttl_seconds)
        if with_sampler
        else None
    )
    state_path = (await state_future.result_async()).path
    sampler_path = (await sampler_future.result_async()).path if sampler_future is not None else None
    rng_rel = f"{CHECKPOINT_DIR}/rng/{name}.pkl"
    rng_file = log_path / rng_rel
    rng_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = rng_file.with_suffix(".tmp")
    with tmp.open("wb") as f:
        pickle.dump(rng_state(), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, rng_file)
    record = CheckpointRecord(
        name=name,
        batch=batch,
        state_path=state_path,
        rng_path=rng_rel,
        sampler_path=sampler_path,
        time=time.time(),
    )
    with (log_path / CHECKPOINTS_FILE).open("a", encoding="utf-8") as f:
        f.write(json.dumps(record.to_json()) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return record


def load_rng(log_path: Path, record: CheckpointRecord) -> None:
    """Restore the RNG states saved with ``record``."""
    with (log_path / record.rng_path).open("rb") as f:
        set_rng_state(pickle.load(f))  # our own file, written by save_checkpoint


def prune_local(log_path: Path, root: Path, keep_last: int) -> list[Path]:
    """Delete the state folders of all but the newest ``keep_last`` local checkpoints (0 keeps
    all; anything not under ``root`` is left alone); return the deleted folders."""
    if keep_last <= 0:
        return []
    records = [r for r in load_records(log_path) if r.name != "final"]
    keep = {r.state_path for r in records[-keep_last:]}
    deleted = []
    for record in records:
        if record.state_path in keep:
            continue
        folder = local_folder(record.state_path, root)
        if folder is None or not folder.exists() or root.resolve() not in folder.resolve().parents:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        (log_path / record.rng_path).unlink(missing_ok=True)
        deleted.append(folder)
    return deleted
