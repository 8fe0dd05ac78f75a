"""``python -m envs.eval``: any env, the embedded (tiny) model or an OpenAI-compatible endpoint;
the results folder; resuming after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

import training
from backend import TINY
from envs.eval import EPISODES_FILE, SUMMARY_FILE, EnvEvalConfig, main, run_env_eval

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path, *args: str) -> EnvEvalConfig:
    return training.parse_config(
        EnvEvalConfig, [f"model_name={TINY}", f"output={tmp_path}", "max_tokens=12", "progress=False", *args]
    )


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / EPISODES_FILE).read_text().splitlines()]


def test_embedded_model_writes_the_results_folder(tmp_path: Path) -> None:
    config = _config(tmp_path, "env=turngym/Math-v0", "n=3", "repeats=2", "temperature=0.7")
    summary = anyio.run(run_env_eval, config)
    rows = _rows(tmp_path)
    assert sorted((r["task"], r["repeat"]) for r in rows) == [(t, r) for t in range(3) for r in range(2)]
    for row in rows:
        assert row["transcript"] and row["transcript"][0]["ob"] and isinstance(row["transcript"][0]["ac"], list)
        assert "".join(row["transcript"][0]["ob"]).count("boxed") >= 1  # the prompt, decoded token by token
        assert row["stop"]
    saved = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert saved["episodes"] == summary.metrics["episodes"] == 6
    assert saved["reward/mean"] == pytest.approx(sum(r["reward"] for r in rows) / 6)
    assert sum(v for k, v in saved.items() if k.startswith("stop/")) == 6
    assert json.loads((tmp_path / "config.json").read_text())["extension_check"] == "full"
    assert "running mean reward" in (tmp_path / "index.html").read_text()  # the viewer page


def test_resume_skips_finished_episodes_and_a_torn_line(tmp_path: Path) -> None:
    config = _config(tmp_path, "env=turngym/Math-v0", "n=4")
    anyio.run(run_env_eval, config)
    rows = _rows(tmp_path)
    kept = [r for r in rows if r["task"] in (0, 2)]
    (tmp_path / EPISODES_FILE).write_text("".join(json.dumps(r) + "\n" for r in kept) + '{"task": 1, "rep')
    summary = anyio.run(run_env_eval, config)
    assert summary.resumed == 2
    again = _rows(tmp_path)
    assert sorted(r["task"] for r in again) == [0, 1, 2, 3]
    assert again[:2] == kept  # finished rows untouched, the torn line gone
    other = _config(tmp_path, "env=turngym/Math-v0", "n=4", "temperature=0.5")
    with pytest.raises(ValueError, match=r"holds another evaluation .*temperature"):
        anyio.run(run_env_eval, other)


def test_resume_after_kill_9(tmp_path: Path) -> None:
    """A real kill mid-run, then the same command: every task once."""
    args = ["-m", "envs.eval", "turngym/Math-v0", "n=24", "max_concurrency=2", f"model_name={TINY}",
            f"output={tmp_path}", "max_tokens=12", "progress=False"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, *args], env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    episodes = tmp_path / EPISODES_FILE
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if episodes.is_file() and len(episodes.read_bytes().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(_rows(tmp_path)) if episodes.read_bytes().endswith(b"\n") else len(_rows_complete(episodes))
    assert 0 < before < 24
    done = subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"(resumed {before})" in done.stdout
    assert sorted(r["task"] for r in _rows(tmp_path)) == list(range(24))


def _rows_complete(path: Path) -> list[dict]:
    lines = path.read_bytes().split(b"\n")[:-1]
    return [json.loads(line) for line in lines]


def test_extension_breaks_are_recorded_with_their_diff(tmp_path: Path) -> None:
    config = _config(tmp_path, "env=tests.broken_envs:RerenderingGroup", "n=2")
    summary = anyio.run(run_env_eval, config)
    assert summary.metrics["traj/ext_breaks_unexpected"] >= 2
    row = _rows(tmp_path)[0]
    broken = [t["break"] for t in row["transcript"] if "break" in t]
    assert broken and not broken[0]["expected"]
    assert broken[0]["before"].endswith("Turns so far: ")  # the re-rendered header changed here
    assert broken[0]["was"].startswith("0") and broken[0]["now"].startswith("1")


def test_openai_compatible_endpoint(tmp_path: Path) -> None:
    from tests.openai_server import start

    server = start(TINY)
    try:
        config = _config(
            tmp_path, "env=turngym/Math-v0", "n=16", "max_concurrency=16", f"base_url={server.base_url}"
        )
        summary = anyio.run(run_env_eval, config)
    finally:
        server.shutdown()
        server.server_close()
    rows = _rows(tmp_path)
    assert len(rows) == 16
    assert summary.metrics["errors"] == 0, ([r["error"] for r in rows if r.get("error")], server.errors)
    assert server.served == sum(r["turns"] for r in rows)
    assert server.peak >= 2  # requests went out concurrently, not one by one through the pool
    assert summary.metrics["traj/ext_breaks_unexpected"] == 0
    assert json.loads((tmp_path / "config.json").read_text())["extension_check"].startswith("not applicable")


def test_endpoint_refuses_a_token_level_env(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["tests.broken_envs:RerenderingGroup", f"output={tmp_path}", "base_url=http://127.0.0.1:9/v1",
                 "n=1", "progress=False"])  # fmt: skip
    assert code == 1  # every episode failed; each failure is recorded, not a crash
    row = _rows(tmp_path)[0]
    assert row["stop"] == "error" and "needs an envs.ChatEnv" in row["error"]
    assert "every episode failed, e.g. TypeError: base_url plays message-level" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope/Missing-v0"], "unknown id"),
        (["turngym/Math-v0", "n=0"], "must be >= 1"),
        (["turngym/Math-v0", "base_url=localhost:8000"], "base_url must start with http"),
        (["turngym/Math-v0", "env_args=[1]"], "env_args must be a JSON object"),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*args, f"output={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_a_group_plays_every_env_with_env_args(tmp_path: Path) -> None:
    config = _config(tmp_path, "env=turngym/Math-v0", "n=2", 'env_args={"group_size": 2}')
    summary = anyio.run(run_env_eval, config)
    rows = _rows(tmp_path)
    assert sorted((r["task"], r["slot"]) for r in rows) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert summary.metrics["episodes"] == 4
    # both envs of a group got the same problem (one builder)
    by_task = {t: {"".join(r["transcript"][0]["ob"]) for r in rows if r["task"] == t} for t in (0, 1)}
    assert all(len(v) == 1 for v in by_task.values())
