"""Every benchmark runs from a fresh clone: each bench's quick mode, run as a user runs it.

Each ``bench/*.py`` runs here in a subprocess (``python bench/NAME.py --quick``, ``PYTHONPATH`` the
repository, offline, in an empty working folder so that nothing a previous run left is found) and
must exit 0 and end with its ratio line(s): ``key=value`` pairs, among them the bench's own key. The
quick modes use the tiny test model and small sizes; their figures prove that the script works
end to end, not what it measures (the full runs, their goals and figures: docs/benchmarks.md).

A bench added to ``bench/`` without an entry in :data:`BENCHES` fails
:func:`test_every_bench_is_run_here`, so none goes unrun.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONPATH": str(ROOT),
}

BENCHES: dict[str, tuple[list[str], str]] = {
    "training_tokens": (["--quick"], "ratio_merged_vs_per_turn"),
    "judge": (["--quick"], "ratio_wall_concurrent_vs_cookbook_small"),
    "grading": (["--quick"], "graded"),
    "fuzz_envs": (["--quick"], "actions"),
    "rollout_engine": (["--quick"], "ratio_wall_vs_ideal"),
    "local_sampler": (["--quick"], "ratio_vs_hf_batched"),
    "local_trainer": (["--quick"], "ratio_tokens_computed_vs_flat"),
    "compute_thread": (["--quick"], "ratio_train_two_vs_one_pool"),
    # --quick: every 8th escape attempt, bursts of 8 (the whole escape suite runs in
    # tests/test_code_sandbox.py)
    "code_sandbox": (["--quick"], "sandbox_vs_bare_subprocess_latency_ratio"),
    "twenty_questions_learning": (["--quick"], "win_rate_warm_start"),
    "compaction_training": (["--quick"], "ratio_trained_tokens_compact_vs_strip"),
    "cookbook_offline": (["--quick"], "cookbook_rl_steps"),
    "self_play": (["--quick"], "deadlocks"),
    "interop": (["--quick"], "textarena_envs_ok"),
    "seed_workflows": (["--quick"], "rm_heldout_accuracy"),
    "executor": (["--quick"], "ratio_latency_bound_ray_vs_inprocess"),
    # no --quick: a 200-episode page, opened and filtered once, in the OS's Chromium (skipped without it)
    "viewer": (["--episodes", "200", "--repeats", "1"], "ratio_open_filter_vs_1s"),
}
"""Each bench: its quick arguments, and a key its ratio line must carry."""

SLOW = {
    "twenty_questions_learning": "trains end to end (warm start, an RL step, evaluation)",
    "compaction_training": "trains three ways end to end",
    "cookbook_offline": "runs the cookbook's RL, SL and DPO trainers and an Inspect eval",
    "local_trainer": "trains the tiny model on both ways, shared-prefix and flat, and compares gradients",
    "self_play": "warm start, a self-play RL step and held-out games, then 1,000 chaos games",
    "seed_workflows": "runs RLHF's three steps, distillation, a sweep and an Inspect eval",
    "executor": "starts a local Ray cluster and kills two of its actors (their replacements start too)",
}
"""Benches whose quick mode takes tens of seconds or more on 2 cores, and why: marked ``slow`` (the
marker's meaning in pyproject.toml), still run by CI, as every bench must be."""

RATIO_LINE = re.compile(r"^\w+=\S+( \w+=\S+)*$")


def test_every_bench_is_run_here() -> None:
    on_disk = {p.stem for p in (ROOT / "bench").glob("*.py")}
    assert on_disk == set(BENCHES), f"benches not run here: {sorted(on_disk - set(BENCHES))}"
    assert set(SLOW) <= set(BENCHES)


def test_docs_name_every_bench() -> None:
    """docs/benchmarks.md names every bench, with the command that runs its quick mode."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    for name, (_, key) in BENCHES.items():
        assert f"bench/{name}.py" in text, f"docs/benchmarks.md does not name bench/{name}.py"
        assert key in text, f"docs/benchmarks.md does not give {name}'s ratio line ({key})"


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in BENCHES],
)
def test_bench_quick_mode_ends_with_its_ratio_line(name: str, tmp_path: Path) -> None:
    args, key = BENCHES[name]
    if name == "viewer":
        from test_viewer_browser import browser_missing

        if browser_missing():
            pytest.skip(f"bench/viewer.py drives Chromium: {browser_missing()}")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / f"{name}.py"), *args],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, tail
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    assert lines, tail
    assert RATIO_LINE.match(lines[-1]), f"bench/{name}.py's last line is not a ratio line: {lines[-1]!r}"
    block: list[str] = []  # the trailing key=value lines
    while lines and RATIO_LINE.match(lines[-1]):
        block.insert(0, lines.pop())
    keys = {pair.split("=", 1)[0] for line in block for pair in line.split()}
    assert key in keys, f"bench/{name}.py ends without {key}=: {block}"
