"""envs.data_files.read_records: every malformed data file is one line naming the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.data_files import DatasetFormatError, read_records


def test_records_of_a_jsonl_file_skip_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n  \n{"a": 2}\n')
    assert list(read_records(path)) == [(1, {"a": 1}), (4, {"a": 2})]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"a": 1}\n{oops\n', r"rows\.jsonl:2: invalid JSON \("),
        (b'{"a": 1}\n[1, 2]\n', r"rows\.jsonl:2: expected a JSON object, got list"),
        (b'{"a": 1}\n{"a": "\xff"}\n', r"rows\.jsonl:2: invalid UTF-8 \(invalid start byte at byte 7\)"),
    ],
)
def test_a_malformed_line_is_one_line_naming_file_and_line(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(content)
    records = read_records(path)
    assert next(records) == (1, {"a": 1})  # lines before the bad one are read
    with pytest.raises(DatasetFormatError, match=message) as info:
        next(records)
    assert "\n" not in str(info.value)


def test_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl: no such file"):
        list(read_records(tmp_path / "nope.jsonl"))
