"""The run folder's JSON files: ``config.json``, ``metrics.jsonl`` and ``eval.jsonl``.

``metrics.jsonl`` has exactly one row per training step (``"step": 0, 1, ...``); ``eval.jsonl``
has one row per evaluation, ``"step": s`` meaning "the policy after s training steps", with
every metric under an ``eval/`` prefix. Rows are appended with a flush and an fsync, so a
``kill -9`` can at worst leave one partial last line, which :func:`read_rows` skips and
:meth:`JsonlLog.truncate` removes.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"
EVAL_FILE = "eval.jsonl"
CONFIG_FILE = "config.json"


def _clean(value: Any) -> Any:
    """JSON-safe scalars: NaN/inf become None, numpy scalars become Python numbers."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The complete JSON rows of a JSONL file (a torn or corrupt line ends the read)."""
    if not path.is_file():
        return []
    rows: list[dict[str, Any]] = []
    with path.open("rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            try:
                row = json.loads(raw)
            except json.JSONDecodeError:
                break
            if isinstance(row, dict):
                rows.append(row)
    return rows


class JsonlLog:
    """An append-only JSONL file of rows keyed by ``step``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self) -> list[dict[str, Any]]:
        """All complete rows."""
        return read_rows(self.path)

    def steps(self) -> list[int]:
        """The ``step`` of every row, in file order."""
        return [int(r["step"]) for r in self.rows() if "step" in r]

    def append(self, step: int, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Append one row ``{"step": step, **metrics}`` durably; return it."""
        row = {"step": step, **{k: _clean(v) for k, v in metrics.items()}}
        line = json.dumps(row, sort_keys=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        return row

    def truncate(self, keep_below: int) -> int:
        """Keep only the complete rows with ``step < keep_below`` (atomic rewrite); return how
        many rows were dropped."""
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        kept = [r for r in self.rows() if int(r.get("step", -1)) < keep_below]
        dropped = len(data.splitlines()) - len(kept)
        if dropped:
            tmp = self.path.with_suffix(self.path.suffix + ".tmp")
            tmp.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
            os.replace(tmp, self.path)
        return dropped


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` ({} when the file is missing or not a JSON object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
