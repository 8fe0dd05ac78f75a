"""The training loop's held-out episodes (``eval_episodes.jsonl``) and the viewer page of a real run."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest

import training
from envs.viewer import build_page
from training._episodes import EVAL_EPISODES_FILE, episode_row
from training._logging import read_rows
from training.testing import ToyConfig


def test_training_run_writes_eval_episodes_and_its_page_lists_them(tmp_path: Path) -> None:
    training.train(ToyConfig(log_path=str(tmp_path), max_steps=2, eval_every=1, progress=False))
    rows = read_rows(tmp_path / EVAL_EPISODES_FILE)
    evals = read_rows(tmp_path / "eval.jsonl")
    assert sorted({r["step"] for r in rows}) == [r["step"] for r in evals] == [0, 1, 2]
    for ev in evals:
        mine = [r for r in rows if r["step"] == ev["step"]]
        assert len(mine) == ev["eval/episodes"]
        assert sum(r["reward"] for r in mine) / len(mine) == pytest.approx(ev["eval/reward/mean"])
        assert all(r["transcript"] and r["turns"] == len(r["transcript"]) for r in mine)
    page = build_page(tmp_path)
    data = json.loads(re.search(r"type='application/json'>(.*?)</script>", page, re.S).group(1))  # type: ignore[union-attr]
    assert len(data["index"]) == len(rows)
    assert {r[7] for r in data["index"]} == {"after step 0", "after step 1", "after step 2"}
    assert len(json.loads(gzip.decompress(base64.b64decode(data["tx"])))) == len(rows)


def test_breaks_without_engine_stats_follow_compaction() -> None:
    """Outside the engine, a break right after a compaction is expected, any other is not."""
    import tinker
    from tinker_cookbook.completers import TokensWithLogprobs
    from tinker_cookbook.rl.types import Trajectory, Transition

    from backend import load_tokenizer
    from rollout import METRIC_COMPACTION

    def tr(ob: list[int], ac: list[int], metrics: dict | None = None) -> Transition:
        return Transition(
            ob=tinker.ModelInput.from_ints(ob), ac=TokensWithLogprobs(ac, None), reward=0.5,
            episode_done=False, metrics=metrics or {},
        )  # fmt: skip

    traj = Trajectory(
        transitions=[
            tr([1, 2], [3], {METRIC_COMPACTION: 1.0}),
            tr([1, 9], [4]),  # rewritten after a compaction: expected
            tr([1, 9, 4, 7], [5]),  # extends
            tr([2, 2], [6]),  # rewritten with no compaction: unexpected
        ],
        final_ob=tinker.ModelInput.empty(),
    )
    row = episode_row({"task": 0}, load_tokenizer(), traj, group_reward=1.0)
    assert (row["breaks"], row["expected_breaks"]) == (1, 1)
    assert [("break" in t, t.get("break", {}).get("expected")) for t in row["transcript"]] == [
        (False, None), (True, True), (False, None), (True, False),
    ]  # fmt: skip
    assert row["transcript"][1]["break"]["at"] == 1 and row["transcript"][3]["break"]["at"] == 0
    assert row["transcript"][2]["ob"] == [load_tokenizer().decode([7])]  # only the new tokens
    assert row["reward"] == pytest.approx(0.5 * 4 + 1.0)
