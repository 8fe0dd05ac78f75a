"""The training loop's trackers: W&B through the cookbook's ``ml_log`` (offline), names unchanged."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest

import training
from training._logging import read_rows
from training.testing import ToyConfig

wandb = pytest.importorskip("wandb", reason="wandb is the optional extra turngym[wandb] (scripts/setup.sh installs it)")


def wandb_records(path: Path) -> list[Any]:
    """The protobuf records of an offline run's ``run-*.wandb`` file (a LevelDB-style log of 32 KiB
    blocks after a 7-byte ``:W&B`` header; wandb ships no Python reader for it any more)."""
    from wandb.proto import wandb_internal_pb2 as pb

    raw = path.read_bytes()
    assert raw[:4] == b":W&B"
    block, pos, chunks, records = 32768, 7, b"", []
    while pos + 7 <= len(raw):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        if kind == 0 and length == 0:  # block padding
            pos += left
            continue
        data, pos = raw[pos + 7 : pos + 7 + length], pos + 7 + length
        chunks = data if kind in (1, 2) else chunks + data
        if kind in (1, 4):  # a full record, or the last chunk of one
            record = pb.Record()
            record.ParseFromString(chunks)
            records.append(record)
    return records


def finished_records(path: Path, timeout_s: float = 60.0) -> list[Any]:
    """The run file's records once its ``exit`` record is written: ``wandb.finish`` returns when the
    run is handed to wandb's core process, whose writer may still be flushing the file (seen under
    load: a read right after ``train`` returned found the run record but no history yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = wandb_records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def test_wandb_offline_run_gets_every_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    config = ToyConfig(
        log_path=str(tmp_path), max_steps=2, eval_every=1, progress=False,
        wandb_project="turngym-test", wandb_name="toy-offline",
    )  # fmt: skip
    training.train(config)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, list((tmp_path / "wandb").iterdir())
    (run_file,) = runs[0].glob("run-*.wandb")
    records = finished_records(run_file)
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert (run.project, run.display_name) == ("turngym-test", "toy-offline")
    config_keys = {i.key for r in records if r.WhichOneof("record_type") == "config" for i in r.config.update}
    config_keys |= {i.key for i in run.config.update}  # an early update may ride in the run record
    assert {"model_name", "max_steps", "wandb_project"} <= config_keys
    history: dict[int, dict[str, Any]] = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            history.setdefault(int(items["_step"]), {}).update(items)
    rows = read_rows(tmp_path / "metrics.jsonl") + read_rows(tmp_path / "eval.jsonl")
    assert sorted(history) == [0, 1, 2]  # training steps 0-1, evaluations after 0, 1 and 2 updates
    for row in rows:
        logged = history[row["step"]]
        for name, value in row.items():
            if name != "step":
                assert logged[name] == pytest.approx(value), name  # every metric, its name unchanged
    assert not (tmp_path / "code.diff").exists()  # the cookbook's JSON logger stays out of our folder


def test_no_project_no_tracker(tmp_path: Path) -> None:
    from training._trackers import Trackers

    trackers = Trackers(None, None, tmp_path, None)
    trackers.log(0, {"step": 0, "x": 1.0})
    assert trackers.logger is None and trackers.url() is None
    trackers.close()
    assert not (tmp_path / "wandb").exists()
