"""The results page in a real headless Chromium (``make test-browser`` installs it; see
scripts/setup_browser.sh): it opens, a filter narrows the list, a transcript expands with its
token boundaries and its break's diff. The screenshot is kept in ``build/test-artifacts/``;
the timings are bench/viewer.py's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envs.viewer import write_page
from tests.viewer_runs import write_eval_run

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "browser" / "viewer.mjs"
ARTIFACTS = ROOT / "build" / "test-artifacts"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or ""


def drive(page: Path, screenshot: Path, stop: str) -> dict:
    """Run the Chromium script on ``page``; its JSON report."""
    out = subprocess.run(
        ["node", str(SCRIPT), str(page), str(screenshot), stop],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CHROMIUM": CHROMIUM},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def browser_missing() -> str:
    """Why the browser test cannot run here ('' when it can)."""
    if not CHROMIUM:
        return "no chromium on PATH: run `make test-browser` (installs the OS package)"
    if shutil.which("node") is None:
        return "no node on PATH (needed to drive chromium): run `make test-browser`"
    if not (ROOT / "tests" / "browser" / "node_modules" / "playwright-core").is_dir():
        return "playwright-core not installed in tests/browser: run `make test-browser`"
    return ""


@pytest.mark.browser
@pytest.mark.skipif(bool(browser_missing()), reason=browser_missing() or "-")
def test_page_opens_filters_and_expands_in_chromium(tmp_path: Path) -> None:
    rows = write_eval_run(tmp_path, episodes=1000)
    page = write_page(tmp_path)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "viewer.png"
    report = drive(page, shot, "max_tokens")
    assert report["errors"] == []
    assert report["rows_all"] == 1000
    assert report["rows_stop"] == sum(r["stop"] == "max_tokens" for r in rows)
    assert report["stops_shown"] == ["max_tokens"]
    narrowed = [r for r in rows if r["stop"] == "max_tokens" and r["breaks"] and r["reward"] >= 0.5]
    assert report["rows_stop_break_reward"] == len(narrowed) > 0
    assert report["count_text"] == f"{len(narrowed)} of 1000 episodes"
    first = narrowed[0]["transcript"]
    assert report["turns"] == len(first)
    assert report["tokens"] == sum(len(t["ac"]) for t in first)  # one span per sampled token
    assert report["break_text"].startswith("extension break at token 150")
    assert shot.stat().st_size > 10_000
