"""The training loop: CLI failures, artifacts of a short run on the tiny model, resume, kill -9.

The runs use :mod:`training.testing` (a token-level parity env) on ``TINY``, so a step takes
well under a second; the whole module runs in about a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import training
from training._checkpoint import CheckpointRecord, last_checkpoint, prune_local
from training._logging import JsonlLog, read_rows
from training.testing import ToyConfig

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO)}


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "training.testing", *args],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --------------------------------------------------------------------------- CLI
@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("no_such_key=1", "unknown key 'no_such_key'"),
        ("learning_rate=abc", "bad value for learning_rate"),
        ("loss_fn=sgd", "bad value for loss_fn"),
        ("learning_rate=-1", "learning_rate must be > 0"),
        ("max_steps", "key=value"),
    ],
)
def test_cli_rejects_bad_arguments_with_one_line(arg: str, expected: str, tmp_path: Path) -> None:
    start = time.monotonic()
    proc = _cli(arg, f"log_path={tmp_path / 'run'}")
    elapsed = time.monotonic() - start
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()  # nothing was started
    assert elapsed < 10  # generous for a shared CPU; the in-process check below is the strict one


def test_cli_parsing_imports_nothing_heavy() -> None:
    code = (
        "import sys;"
        "from training.testing import ToyConfig; from training import run_cli;"
        "rc = run_cli(ToyConfig, ['nope=1']);"
        "heavy = [m for m in ('tinker', 'torch', 'transformers', 'tinker_cookbook') if m in sys.modules];"
        "print(rc, heavy)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=60
    )
    rc, rest = proc.stdout.split(" ", 1)
    assert rc == "2"
    # No heavy module is imported to reject the line: that is what keeps it fast (how fast is a
    # benchmark's business, not a timed unit test's: a wall-clock limit failed here under load).
    assert rest.strip() == "[]", proc.stdout


def test_parse_config_types_and_subclass_defaults() -> None:
    config = training.parse_config(ToyConfig, ["learning_rate=3e-4", "group_size=2", "lr_schedule=linear"])
    assert isinstance(config, ToyConfig)
    assert config.learning_rate == 3e-4 and config.group_size == 2
    assert config.model_name == "turngym/tiny-random-llama"  # the subclass default
    assert config.lr_at(0) == pytest.approx(3e-4)
    assert config.lr_at(config.max_steps // 2) == pytest.approx(1.5e-4)
    assert training.parse_config(ToyConfig, []).lr_at(1) == training.parse_config(ToyConfig, []).learning_rate


def test_help_lists_keys() -> None:
    proc = _cli("--help")
    assert proc.returncode == 0
    assert "learning_rate" in proc.stdout and "group_size" in proc.stdout


# --------------------------------------------------------------------------- runs
def _steps(path: Path, name: str) -> list[int]:
    return [int(r["step"]) for r in read_rows(path / name)]


@pytest.fixture(scope="module")
def two_step_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("run")
    config = ToyConfig(log_path=str(log), max_steps=2, eval_every=1, progress=False)
    summary = training.train(config)
    assert summary.start_step == 0 and summary.end_step == 2
    return log


def test_two_step_run_writes_every_artifact(two_step_run: Path) -> None:
    log = two_step_run
    config = json.loads((log / "config.json").read_text())
    assert config["max_steps"] == 2 and config["__class__"].endswith("ToyConfig")

    rows = read_rows(log / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1]
    for key in (
        "reward/mean",
        "reward/std",
        "win_rate",
        "turns/mean",
        "tokens/sampled",
        "tokens/per_second",
        "datums",
        "rollout/traj/datums_per_traj",
        "rollout/traj/ext_breaks",
        "time/sample",
        "time/train",
        "time/step",
        "optim/lr",
    ):
        assert key in rows[0], key
    assert rows[0]["turns/mean"] == 2.0  # the parity env always plays 2 turns
    assert rows[0]["rollout/traj/datums_per_traj"] == 1.0  # its observations always extend
    assert rows[0]["rollout/traj/ext_breaks"] == 0.0
    # one metric per fact: no copies under other names
    for gone in ("datums_per_trajectory", "extension_breaks", "assembly/datums/count"):
        assert all(gone not in r for r in rows), gone
    trained = [r for r in rows if r["datums"] > 0]
    assert trained, "with 4 random samples per group some group has mixed rewards"
    assert "optim/kl_sample_train_v1" in trained[0] and "optim/kl_sample_train_v2" in trained[0]
    assert abs(trained[0]["optim/kl_sample_train_v1"]) < 1e-3  # on-policy: sampler == trainer

    evals = read_rows(log / "eval.jsonl")
    assert [r["step"] for r in evals] == [0, 1, 2]
    assert all(k.startswith("eval/") for r in evals for k in r if k not in ("step", "stage"))
    assert [r["stage"] for r in evals] == ["untrained", "rl", "rl"]
    assert 0.0 <= evals[-1]["eval/win_rate"] <= 1.0

    png = (log / "reward_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    html = (log / "transcripts" / "eval_step0002.html").read_text()
    assert html.count('class="ep"') == 4 and "turn 2" in html
    assert (log / "transcripts" / "train_step0001.html").read_text().count('class="ep"') == 2

    records = [json.loads(line) for line in (log / "checkpoints.jsonl").read_text().splitlines()]
    assert [r["batch"] for r in records] == [1, 2]
    assert records[-1]["sampler_path"].startswith("local://")
    assert (log / "train.log").is_file()


def test_rerun_with_same_log_path_resumes_without_duplicates(two_step_run: Path) -> None:
    config = ToyConfig(log_path=str(two_step_run), max_steps=4, eval_every=2, progress=False)
    summary = training.train(config)
    assert summary.start_step == 2 and summary.end_step == 4
    assert _steps(two_step_run, "metrics.jsonl") == [0, 1, 2, 3]
    assert _steps(two_step_run, "eval.jsonl") == [0, 1, 2, 4]  # step 2 was already evaluated
    record = last_checkpoint(two_step_run)
    assert record is not None and record.batch == 4
    # keep_last=2: only the two newest state folders remain on disk
    states = sorted(p.name for p in (two_step_run / "checkpoints").glob("*/weights/*"))
    assert states == ["000003", "000004"]


def test_resuming_a_run_stopped_before_its_final_save_saves_its_sampler(tmp_path: Path) -> None:
    training.train(ToyConfig(log_path=str(tmp_path), max_steps=2, eval_every=0, progress=False))
    lines = (tmp_path / "checkpoints.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["batch"] == 1 and not json.loads(lines[0]).get("sampler_path")
    (tmp_path / "checkpoints.jsonl").write_text(lines[0] + "\n")  # stopped after step 0
    summary = training.train(ToyConfig(log_path=str(tmp_path), max_steps=1, eval_every=0, progress=False))
    assert summary.start_step == 1 and summary.end_step == 1  # nothing left to train
    record = last_checkpoint(tmp_path)
    assert record is not None and record.batch == 1 and (record.sampler_path or "").startswith("local://")


def test_resume_false_refuses_a_used_folder(two_step_run: Path) -> None:
    with pytest.raises(training.RunFolderError):
        training.train(ToyConfig(log_path=str(two_step_run), max_steps=5, resume=False, progress=False))


def test_off_policy_mode_bounds_staleness(tmp_path: Path) -> None:
    config = ToyConfig(
        log_path=str(tmp_path), max_steps=3, eval_every=0, max_steps_off_policy=1, progress=False
    )
    training.train(config)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2]
    staleness = [r["sampling/staleness"] for r in rows]
    assert all(0 <= s <= 1 for s in staleness)
    assert max(staleness) == 1  # batches 1 and 2 were sampled while the previous step trained


@pytest.mark.parametrize("executor", ["inprocess", "process:2"])
def test_kill_9_mid_run_then_resume_has_each_step_once(tmp_path: Path, executor: str) -> None:
    log = tmp_path / "killed"
    args = [f"log_path={log}", "max_steps=6", "eval_every=0", "save_every=2", "progress=False"]
    args.append(f"rollout_executor={executor}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "training.testing", *args],
        cwd=REPO,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while len(_steps(log, "metrics.jsonl")) < 3 and time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    before = _steps(log, "metrics.jsonl")
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert 3 <= len(before) < 6
    record = last_checkpoint(log)
    assert record is not None and record.batch == 2  # save_every=2, killed after step 2
    done = _cli(*args, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _steps(log, "metrics.jsonl") == list(range(6))


# --------------------------------------------------------------------------- units
def test_jsonl_truncate_drops_later_rows_and_a_torn_line(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "m.jsonl")
    for step in range(4):
        log.append(step, {"x": float(step), "nan": float("nan")})
    with log.path.open("a") as f:
        f.write('{"step": 4, "x"')  # a write torn by kill -9
    assert log.steps() == [0, 1, 2, 3]
    assert log.rows()[0]["nan"] is None
    assert log.truncate(2) == 3
    assert log.steps() == [0, 1]
    assert log.path.read_text().endswith("\n")
    assert log.truncate(2) == 0


def test_prune_local_keeps_newest_and_ignores_foreign_paths(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    lines = [
        json.dumps({"name": "x", "batch": 9, "state_path": "tinker://abc/weights/x", "rng_path": "nope"})
    ]
    for batch in (1, 2, 3):
        folder = root / "run" / "weights" / f"{batch:06d}"
        folder.mkdir(parents=True)
        rng = tmp_path / "checkpoints" / "rng" / f"{batch:06d}.pkl"
        rng.parent.mkdir(parents=True, exist_ok=True)
        rng.write_bytes(b"x")
        record = CheckpointRecord(
            name=f"{batch:06d}",
            batch=batch,
            state_path=f"local://run/weights/{batch:06d}",
            rng_path=f"checkpoints/rng/{batch:06d}.pkl",
        )
        lines.append(json.dumps(record.to_json()))
    (tmp_path / "checkpoints.jsonl").write_text("\n".join(lines) + "\n")
    deleted = prune_local(tmp_path, root, keep_last=2)
    assert [p.name for p in deleted] == ["000001"]
    assert sorted(p.name for p in (root / "run" / "weights").iterdir()) == ["000002", "000003"]
    record = last_checkpoint(tmp_path)  # the tinker record has no RNG file: skipped
    assert record is not None and record.batch == 3


def test_warm_start_runs_once_and_lowers_the_sft_loss(tmp_path: Path) -> None:
    datum = training.sft_datum([1, 9690, 198, 100, 200, 300, 2], [0, 0, 0, 0, 1, 1, 1])
    assert datum.model_input.length == 6
    assert datum.loss_fn_inputs["weights"].to_torch().tolist() == [0, 0, 0, 1, 1, 1]
    hook = training.supervised_warm_start([datum], steps=6, batch_size=1, learning_rate=1e-2)
    calls: list[dict[str, float]] = []

    async def spy(client, config):  # type: ignore[no-untyped-def]
        out = await hook(client, config)
        calls.append(out)
        return out

    config = ToyConfig(log_path=str(tmp_path), max_steps=1, eval_every=0, progress=False)
    training.train(config, warm_start=spy)
    assert len(calls) == 1 and calls[0]["warm_start/loss_last"] < calls[0]["warm_start/loss_first"]
    training.train(
        ToyConfig(log_path=str(tmp_path), max_steps=2, eval_every=0, progress=False), warm_start=spy
    )
    assert len(calls) == 1  # a resumed run does not warm-start again
    assert _steps(tmp_path, "metrics.jsonl") == [0, 1]


def test_time_budget_stops_early_with_a_checkpoint_and_a_final_eval(tmp_path: Path) -> None:
    config = ToyConfig(
        log_path=str(tmp_path),
        max_steps=50,
        eval_every=100,
        save_every=0,
        time_budget_minutes=1e-4,
        progress=False,
    )
    summary = training.train(config)
    assert summary.end_step == 1
    assert _steps(tmp_path, "metrics.jsonl") == [0]
    assert _steps(tmp_path, "eval.jsonl") == [0, 1]
    record = last_checkpoint(tmp_path)
    assert record is not None and record.batch == 1


def test_lr_scale_by_signal_scales_each_step_by_its_informative_groups(tmp_path: Path) -> None:
    config = ToyConfig(  # pairs of one-turn games: a group is constant with probability ~1/2
        log_path=str(tmp_path),
        max_steps=4,
        eval_every=0,
        progress=False,
        batch_size=4,
        group_size=2,
        turns=1,
        lr_scale_by_signal=True,
    )
    training.train(config)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert len(rows) == 4
    for row in rows:
        fraction = row["groups/trained"] / row["groups/total"]
        assert row["optim/lr"] == pytest.approx(config.learning_rate * fraction)
    assert any(r["groups/trained"] < r["groups/total"] for r in rows)  # some step was scaled down


def test_a_run_that_trains_on_no_datum_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = ToyConfig(  # one episode per group: every group is constant, every group is dropped
        log_path=str(tmp_path), max_steps=3, eval_every=0, save_every=0, group_size=1, progress=False
    )
    summary = training.train(config)
    rows = read_rows(tmp_path / "metrics.jsonl")
    assert [r[training.METRIC_NO_DATUM] for r in rows] == [1.0, 1.0, 1.0]
    assert all(r["datums"] == 0 for r in rows)
    assert summary.learned_nothing and summary.steps_without_datum == 3
    assert "3 of 3 steps trained on no datum" in summary.describe()
    assert "warm start" in summary.describe()
    log = (tmp_path / "train.log").read_text()
    assert "step 0 trained on no datum: every one of the 2 groups gave all its episodes one reward" in log


def test_reward_curve_labels_each_stage_on_the_held_out_curve() -> None:
    from training._plot import _stage_labels

    def rows(*points: tuple[int, float, str | None]) -> list[dict[str, object]]:
        return [{"step": s, "eval/win_rate": y, **({"stage": st} if st else {})} for s, y, st in points]

    key = "eval/win_rate"
    staged = rows((0, 0.1, "untrained"), (0, 0.4, "warm_start"), (10, 0.7, "rl"), (20, 0.9, "rl"))
    assert _stage_labels(staged, key, warm_start=True) == [
        (0, 0.1, "untrained"),
        (0, 0.4, "after warm start"),
        (20, 0.9, "after 20 RL steps"),
    ]
    # rows of a run folder written before eval rows named their stage
    assert _stage_labels(rows((0, 0.4, None), (20, 0.9, None)), key, warm_start=True) == [
        (0, 0.4, "after warm start"),
        (20, 0.9, "after 20 RL steps"),
    ]
    assert _stage_labels(rows((0, 0.1, None)), key, warm_start=False) == [(0, 0.1, "untrained")]
    assert _stage_labels(rows((5, 0.5, "rl"), (10, 0.6, "rl")), key, warm_start=False) == [
        (10, 0.6, "after 10 RL steps")
    ]
