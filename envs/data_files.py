"""Reading the envs' data files, with errors of one line that name the file and line.

Standard library only at import (``pyarrow`` is imported for ``.parquet`` files only), so a train
command checks its data files before anything heavy loads.

- :func:`read_records`: ``(line number, object)`` of each record of a ``.jsonl`` or ``.parquet`` file.
- :class:`DatasetFormatError`: a malformed data file (a ``ValueError``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class DatasetFormatError(ValueError):
    """A data file is malformed; the message names the file and line."""


def read_records(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each record of a ``.jsonl`` file (one JSON object per line,
    blank lines skipped) or a ``.parquet`` file (row numbers from 1).

    Raises:
        FileNotFoundError: ``<path>: no such file``.
        DatasetFormatError: ``<path>:<line>: invalid JSON (...)``, invalid UTF-8, a line that is
            not a JSON object, or an unreadable parquet file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as e:
            raise DatasetFormatError(f"{path}: not a readable parquet file ({e})") from None
        yield from enumerate(table.to_pylist(), start=1)
        return
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DatasetFormatError(
                    f"{path}:{lineno}: invalid UTF-8 ({e.reason} at byte {e.start})"
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetFormatError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DatasetFormatError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            yield lineno, row
