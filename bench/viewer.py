"""Benchmark: the results page of a 1,000-episode evaluation in headless Chromium.

Builds a synthetic 1,000-episode run (3 turns each: a 110-token prompt, 40-token actions;
``tests/viewer_runs.py``), writes its page and opens it ``--repeats`` times in the OS's Chromium
(``make test-browser`` installs it and playwright-core), each time: load until the list is built,
then one stop-reason filter. Reports the page size and the median of: the wall time from
navigation to a built list (``open``), the same inside the page (``performance.now()`` at ready),
the filter's wall time seen by the driver and its in-page render time.

Ends with ``ratio_open_filter_vs_1s=<x>``: (median open + filter wall time) / 1 s; the goal is < 1.

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/viewer.py [--episodes 1000 --repeats 5]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envs.viewer import write_page  # noqa: E402
from tests.test_viewer_browser import ARTIFACTS, browser_missing, drive  # noqa: E402
from tests.viewer_runs import write_eval_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    missing = browser_missing()
    if missing:
        sys.exit(f"cannot run: {missing}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_eval_run(folder, episodes=args.episodes)
        page = write_page(folder)
        size = page.stat().st_size
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        reports = [drive(page, ARTIFACTS / "viewer_bench.png", "max_tokens") for _ in range(args.repeats)]
    med = {k: statistics.median(r[k] for r in reports) for k in ("open_ms", "ready_in_page_ms", "filter_ms", "filter_in_page_ms")}
    print(f"page: {args.episodes} episodes, {size / 1024:.0f} KiB ({size / 2**20:.2f} MiB; goal <= 2 MiB)")
    print(
        f"median of {args.repeats}: open {med['open_ms']:.0f} ms (in page {med['ready_in_page_ms']:.0f} ms), "
        f"filter {med['filter_ms']:.0f} ms (in page render {med['filter_in_page_ms']:.0f} ms)"
    )
    print(f"ratio_open_filter_vs_1s={(med['open_ms'] + med['filter_ms']) / 1000:.4f}")


if __name__ == "__main__":
    main()
