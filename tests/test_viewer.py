"""The results viewer page (its content; the browser test is tests/test_viewer_browser.py)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest

from envs.viewer import PAGE_FILE, build_page, main, write_page
from tests.viewer_runs import write_eval_run, write_training_run


def _payload(page: str) -> dict:
    raw = re.search(r"<script id='data' type='application/json'>(.*?)</script>", page, re.S)
    assert raw is not None
    return json.loads(raw.group(1))


def test_eval_page_holds_index_and_transcripts(tmp_path: Path) -> None:
    rows = write_eval_run(tmp_path, episodes=50)
    page = build_page(tmp_path)
    data = _payload(page)
    assert [r[1] for r in data["index"]] == [r["reward"] for r in rows]
    assert [r[2] for r in data["index"]] == [r["stop"] for r in rows]
    assert [r[4] for r in data["index"]] == [r["breaks"] for r in rows]
    transcripts = json.loads(gzip.decompress(base64.b64decode(data["tx"])))
    assert transcripts == [r["transcript"] for r in rows]
    assert page.count("<svg") == 2  # running mean and histogram
    assert "<b>x</b>" not in page  # a token that looks like markup stays inside the JSON, escaped


def test_page_of_a_1000_episode_run_is_at_most_2_mb(tmp_path: Path) -> None:
    write_eval_run(tmp_path, episodes=1000)
    path = write_page(tmp_path)
    assert path == tmp_path / PAGE_FILE
    assert path.stat().st_size <= 2 * 1024 * 1024
    assert (tmp_path / "episodes.jsonl").stat().st_size > 2 * path.stat().st_size  # the transcripts are compressed


def test_training_run_page(tmp_path: Path) -> None:
    write_training_run(tmp_path)
    page = build_page(tmp_path)
    data = _payload(page)
    assert page.count("<svg") == 2 and "eval/reward/mean" in page
    assert data["summary"]["reward/mean"] == pytest.approx(0.1 + 0.05 * 11)
    assert data["links"] == ["transcripts/eval_step0000.html"]


def test_not_a_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err
