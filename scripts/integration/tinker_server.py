"""Opt-in integration check: TurnGym's training loop against a real Tinker-API server over HTTP.

``make integration`` runs this after ``scripts/integration/setup_server.sh`` (SkyRL tx in its own
virtual environment). The check:

1. prepares a local model folder SkyRL tx (transformers 4.x) can load: the converted SmolLM2 with
   two config fixes, optionally cut to its first ``--layers`` decoder layers;
2. starts SkyRL tx behind ``skyrl_bridge.py`` (the tinker-SDK wire gaps, bridged in test code
   only) on 127.0.0.1, in its own process group, with a persistent JAX compilation cache;
3. runs ``python -m envs.twenty_questions.train backend=tinker base_url=... max_steps=2`` (plus the
   model and a small batch), waits for the ``tinker://`` checkpoint of step 0, and SIGKILLs it
   while step 1 runs;
4. reruns the same command, which resumes from that checkpoint (``load_state_with_optimizer``);
5. checks: every step once in ``metrics.jsonl`` (and every evaluation once in ``eval.jsonl``),
   every checkpoint a ``tinker://`` path, the final one with a sampler path, both steps trained on
   datums, and sampling from the trained weights: logprobs of a fixed sequence under the base
   model, under the state saved after step 0 (loaded with its optimizer, as the resume does) and
   under the final sampler weights all differ;
6. stops the server process group it started (and nothing else) and prints
   ``tinker_server=ok steps=<n> resumed=ok`` last.

Any failure prints one ``tinker_server=FAILED: <why>`` line (exit 1); the run folder and the server
log stay in ``--workdir`` for inspection.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEFAULT_VENV = Path(os.environ.get("SKYRL_VENV", ROOT / ".venv-skyrl"))  # as setup_server.sh
API_KEY = "tml-turngym-integration"  # the SDK wants a key; the local server ignores it
# SkyRL tx compiles one XLA executable per padded shape (sequences pad to 32, 48, 64, 96, 128,
# 192...; sampling batches to ``sample_max_num_sequences``; a training pass is ``min(micro batch,
# datums)`` sequences) and keeps it in the persistent JAX cache (``--jax-cache``), which later runs
# hit. A step trains on 4 or 8 datums (a group with equal rewards is dropped): micro batches of 4
# make both one shape.
BACKEND_CONFIG = {
    "max_lora_adapters": 4,  # the killed run's model, the resumed run's, the check's
    "max_lora_rank": 16,
    "train_micro_batch_size": 4,  # a group's datums per pass: one shape for 4 or 8 datums
    "sample_max_num_sequences": 8,  # one step's games in one batch (batches are padded to this)
}
# Small enough for a 2-core CPU server: 2 words x 4 games per step, 2 turns per game of at most 16
# tokens each (prompts pad to 64-128, whole games to 128), no held-out evaluation. The untrained
# model rarely asks or guesses within 16 tokens, so without a cost for a cut turn most groups score
# the same (no datum, nothing trained); with it, rewards differ with how many turns ran out of
# tokens. The game and the loop are pinned to the easy setting of the smoke test (4 candidates,
# questions cost 0.05, lr 1e-3, 16 tokens a turn, no warm start), not to make train's defaults: the
# main job's real game (8 candidates, free questions, a 64-game warm start) gave every group of
# this tiny run the same reward 0, so nothing was trained and the check had nothing to verify.
TRAIN_KEYS = [
    "data.batch_size=2",
    "data.group_size=4",
    "env.candidates=4",
    "env.question_reward=-0.05",
    "env.max_questions=2",
    "env.truncation_penalty=0.05",
    "warm_start.episodes=0",
    "learning_rate=1e-3",
    "lr_scale_by_signal=false",
    "max_tokens=16",
    "eval_every=0",
    "progress=false",
]


# The model-sized functions SkyRL tx jits (each executable ~150 MB; the rest are tiny).
MODEL_FUNCTIONS = ("_prefill_and_decode", "forward_backward_and_accumulate", "forward", "compute_grads_and_update")


class CheckFailed(RuntimeError):
    """One integration expectation did not hold (the message says which)."""


def log(message: str) -> None:
    print(f"[integration] {message}", flush=True)


# ---------------------------------------------------------------------------------- the model folder
def prepare_model(cache: Path, layers: int) -> Path:
    """A copy of the converted SmolLM2 that transformers 4.x loads (weights symlinked, or cut to
    the first ``layers`` decoder layers when ``layers > 0``); made once, then reused."""
    from backend.model import ensure_converted

    source = ensure_converted()
    name = f"{source.name}-tf4" + (f"-{layers}layers" if layers else "")
    target = cache / name
    if (target / "config.json").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".model-", dir=cache))
    try:
        for item in source.iterdir():
            if item.suffix in (".json", ".jinja", ".txt"):
                shutil.copy2(item, tmp / item.name)
        config = json.loads((tmp / "config.json").read_text())
        rope = config.get("rope_parameters") or {}
        config.setdefault("rope_theta", rope.get("rope_theta", 100000.0))  # 4.x reads it at top level
        tok_config = json.loads((tmp / "tokenizer_config.json").read_text())
        tok_config["tokenizer_class"] = "PreTrainedTokenizerFast"  # 4.x has no TokenizersBackend
        (tmp / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2))
        if layers:
            from safetensors.torch import load_file, save_file

            tensors = load_file(str(source / "model.safetensors"))
            keep = {
                k: v
                for k, v in tensors.items()
                if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers
            }
            save_file(keep, str(tmp / "model.safetensors"), metadata={"format": "pt"})
            config["num_hidden_layers"] = layers
        else:
            (tmp / "model.safetensors").symlink_to(source / "model.safetensors")
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


# ---------------------------------------------------------------------------------- processes
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, condition: Callable[[], bool], timeout: float, alive: Callable[[], bool]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if not alive():
            raise CheckFailed(f"{what}: the process exited first")
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.2)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/healthz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


class Server:
    """SkyRL tx behind the bridge, in its own process group (stopped with it, nothing else)."""

    def __init__(
        self, venv: Path, model: Path, port: int, workdir: Path, jax_cache: Path, backend_config: dict[str, Any]
    ) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log_file = workdir / "server.log"
        env = dict(os.environ)
        env.update(
            PATH=f"{venv / 'shim'}{os.pathsep}{env.get('PATH', '')}",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            JAX_PLATFORMS="cpu",
            JAX_COMPILATION_CACHE_DIR=str(jax_cache),
            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
            JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
            # logs each persistent-cache hit and miss (summarized by compile_report)
            JAX_DEBUG_LOG_MODULES="jax._src.compiler",
        )
        env.pop("VIRTUAL_ENV", None)
        cmd = [
            str(venv / "bin" / "python"),
            str(HERE / "skyrl_bridge.py"),
            "--base-model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--database-url",
            f"sqlite:///{workdir / 'tx.db'}",
            "--checkpoints-base",
            str(workdir / "server-checkpoints"),
            "--backend-config",
            json.dumps(backend_config),
            # SkyRL tx unloads a model 300 s after its session's last heartbeat, and a sampler path
            # of an unloaded model cannot be sampled: keep the finished runs' models for the checks.
            "--session-timeout-sec",
            "86400",
        ]
        with self.log_file.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM the process group this object started (the API and its engine), then SIGKILL."""
        if self.proc.poll() is not None and not _group_alive(self.proc.pid):
            return
        for sig, grace in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                self.proc.poll()
                if not _group_alive(self.proc.pid):
                    return
                time.sleep(0.2)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def compile_report(server_log: str) -> str:
    """One line on what the server compiled: SkyRL tx's padded shapes (first use of each) and the
    persistent JAX cache's hits and misses (= compiles) for the model-sized functions."""
    shapes: dict[str, list[int]] = {}
    for mode, length in re.findall(r"JIT compiling for (sample|train) seq_len=(\d+)", server_log):
        shapes.setdefault(mode, []).append(int(length))
    outcome = {"hit": 0, "miss": 0}
    missed: list[str] = []
    pattern = r"(Persistent compilation cache hit|PERSISTENT COMPILATION CACHE MISS) for 'jit_(\w+)'"
    for kind, name in re.findall(pattern, server_log):
        if name in MODEL_FUNCTIONS:
            outcome["miss" if kind.isupper() else "hit"] += 1
            if kind.isupper():
                missed.append(name)
    padded = "; ".join(f"{mode} seq_len {', '.join(map(str, lengths))}" for mode, lengths in shapes.items())
    compiled = f" (compiled: {', '.join(missed)})" if missed else ""
    return (
        f"padded shapes: {padded or 'none'}; persistent JAX cache, model-sized executables: "
        f"{outcome['hit']} hits, {outcome['miss']} misses{compiled}"
    )


def train_command(url: str, model: Path, run_dir: Path, extra: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "envs.twenty_questions.train",
        "backend=tinker",
        f"base_url={url}",
        "max_steps=2",
        f"model_name={model}",
        f"log_path={run_dir}",
        *TRAIN_KEYS,
        *extra,
    ]


def start_training(cmd: list[str], output: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, TINKER_API_KEY=API_KEY, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    with output.open("ab") as out:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


# ---------------------------------------------------------------------------------- checks
def rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_run(run_dir: Path, output: str) -> tuple[list[int], list[Any]]:
    """The resumed run's artifacts: each step once, tinker:// checkpoints, trained on datums."""
    from training._checkpoint import load_records

    if "resuming at step 1" not in output:
        raise CheckFailed("the second invocation did not resume at step 1")
    metrics = rows(run_dir / "metrics.jsonl")
    steps = [int(r["step"]) for r in metrics]
    if steps != [0, 1]:
        raise CheckFailed(f"metrics.jsonl steps are {steps}, expected [0, 1] (each step once)")
    untrained = [int(r["step"]) for r in metrics if not r.get("datums")]
    if untrained:
        raise CheckFailed(f"steps {untrained} trained on no datum (all groups constant): nothing to verify")
    evals = [(int(r["step"]), r.get("stage", "")) for r in rows(run_dir / "eval.jsonl")]
    if len(set(evals)) != len(evals):
        raise CheckFailed(f"eval.jsonl steps are {evals}: an evaluation ran twice")
    records = load_records(run_dir)
    if [r.batch for r in records] != [1, 2]:
        raise CheckFailed(f"checkpoint batches are {[r.batch for r in records]}, expected [1, 2]")
    for r in records:
        if not r.state_path.startswith("tinker://"):
            raise CheckFailed(f"checkpoint {r.name} has state_path {r.state_path!r}, not tinker://")
    final = records[-1]
    if not (final.sampler_path or "").startswith("tinker://"):
        raise CheckFailed(f"the final checkpoint has sampler_path {final.sampler_path!r}, not tinker://")
    return steps, records


def check_sampling(url: str, model: Path, records: list[Any]) -> dict[str, float]:
    """Logprobs of one fixed sequence: base model vs the state saved after step 0 (the resume
    point, loaded with its optimizer into a new client) vs the final sampler weights."""
    import tinker
    from transformers import AutoTokenizer

    os.environ["TINKER_API_KEY"] = API_KEY
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    text = (
        "<|im_start|>user\nLet's play Twenty Questions. The candidates are: apple, horse, guitar, "
        "river.<|im_end|>\n<|im_start|>assistant\nGuess: horse<|im_end|>\n"
    )
    prompt = tinker.ModelInput.from_ints(tokenizer.encode(text))
    service = tinker.ServiceClient(base_url=url)
    resumed = service.create_training_client_from_state_with_optimizer(records[0].state_path).result()
    samplers = {
        "base": service.create_sampling_client(base_model=str(model)).result(),
        "after_step0": resumed.save_weights_and_get_sampling_client().result(),
        "final": service.create_sampling_client(model_path=records[-1].sampler_path).result(),
    }
    logprobs = {}
    for name, client in samplers.items():
        values = client.compute_logprobs(prompt).result()
        logprobs[name] = [float(v) for v in values[1:] if v is not None]
    if len({len(v) for v in logprobs.values()}) != 1 or not logprobs["base"]:
        raise CheckFailed(f"logprob lengths differ: { {k: len(v) for k, v in logprobs.items()} }")

    def gap(a: str, b: str) -> float:
        return max(abs(x - y) for x, y in zip(logprobs[a], logprobs[b], strict=True))

    gaps = {
        "base_vs_after_step0": gap("base", "after_step0"),
        "after_step0_vs_final": gap("after_step0", "final"),
        "base_vs_final": gap("base", "final"),
    }
    for name, value in gaps.items():
        if not value > 1e-4:
            raise CheckFailed(f"sampling did not use trained weights: max logprob gap {name} = {value:.2e}")
    return gaps


# ---------------------------------------------------------------------------------- main
def run(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    workdir = Path(args.workdir).resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    venv = Path(args.venv).resolve()
    if not (venv / "bin" / "python").is_file() or not (venv / "shim" / "uv").is_file():
        raise CheckFailed(f"{venv} is not set up: run `bash scripts/integration/setup_server.sh` first")
    from backend.model import cache_dir

    cache = cache_dir() / "skyrl-tx"
    model = prepare_model(cache, args.layers)
    log(f"model folder: {model} (load average {' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    port = args.port or free_port()
    backend_config = {**BACKEND_CONFIG, **json.loads(args.backend_config)}
    jax_cache = Path(args.jax_cache).expanduser().resolve() if args.jax_cache else cache / "jax-cache"
    server = Server(venv, model, port, workdir, jax_cache, backend_config)
    trainer: subprocess.Popen[bytes] | None = None
    try:
        log(f"SkyRL tx starting on {server.url} (pid {server.proc.pid}; log {server.log_file})")
        wait_for("server health", lambda: healthy(server.url), 300, server.alive)
        log(f"server healthy after {time.monotonic() - t0:.0f} s")
        run_dir = workdir / "run"
        output = workdir / "train.out"
        cmd = train_command(server.url, model, run_dir, args.train_arg)
        log("run 1: " + " ".join(cmd[1:]))
        trainer = start_training(cmd, output)
        t1 = time.monotonic()
        first = trainer
        wait_for(
            "the tinker:// checkpoint after step 0",
            lambda: any(r.get("batch") == 1 for r in rows(run_dir / "checkpoints.jsonl")),
            args.timeout,
            lambda: first.poll() is None,
        )
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        steps_at_kill = [int(r["step"]) for r in rows(run_dir / "metrics.jsonl")]
        log(f"run 1: step 0 done and checkpointed in {time.monotonic() - t1:.0f} s; SIGKILL during step 1")
        if steps_at_kill != [0]:
            raise CheckFailed(f"at the kill metrics.jsonl had steps {steps_at_kill}, expected [0]")
        t2 = time.monotonic()
        log("run 2: the same command (resumes)")
        trainer = start_training(cmd, output)
        second = trainer
        wait_for("the resumed run", lambda: second.poll() is not None, args.timeout, lambda: True)
        text = output.read_text(errors="replace")
        if second.returncode != 0:
            tail = "\n".join(text.splitlines()[-15:])
            raise CheckFailed(f"the resumed run exited {second.returncode}:\n{tail}")
        log(f"run 2: finished in {time.monotonic() - t2:.0f} s")
        steps, records = check_run(run_dir, text)
        gaps = check_sampling(server.url, model, records)
        log("checkpoints: " + ", ".join(f"{r.name}={r.state_path}" for r in records))
        log(f"final sampler: {records[-1].sampler_path}")
        log("max logprob gaps (trained weights in use): " + ", ".join(f"{k}={v:.3g}" for k, v in gaps.items()))
        for row in rows(run_dir / "metrics.jsonl"):
            kl = row.get("optim/kl_sample_train_v1")
            log(f"step {row['step']}: datums={row.get('datums')} reward={row.get('reward/mean', row.get('reward/total'))} kl_sample_train_v1={kl}")
        log(f"server: {compile_report(server.log_file.read_text(errors='replace'))} ({jax_cache})")
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        log(f"total {time.monotonic() - t0:.0f} s (load average {load}); artifacts in {workdir}")
    finally:
        if trainer is not None and trainer.poll() is None:
            os.kill(trainer.pid, signal.SIGKILL)
            trainer.wait()
        server.stop()
        log("server stopped")
    print(f"tinker_server=ok steps={len(steps)} resumed=ok", flush=True)
    return 0


def _interrupted(signum: int, frame: Any) -> None:
    raise CheckFailed(f"interrupted by signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/integration/tinker_server.py",
        description="Train Twenty Questions for 2 steps against SkyRL tx (a Tinker-API server) on "
        "127.0.0.1, SIGKILL the run after step 0's checkpoint, resume it, and check the result. "
        "Needs `bash scripts/integration/setup_server.sh` first (`make integration` does both).",
    )
    parser.add_argument("--venv", default=str(DEFAULT_VENV), help="SkyRL tx virtual environment")
    parser.add_argument("--workdir", default=str(ROOT / "runs" / "integration"), help="emptied, then holds "
                        "the run folder, train.out, server.log and the server's database and checkpoints")
    parser.add_argument("--port", type=int, default=0, help="server port (0: a free one)")
    parser.add_argument("--layers", type=int, default=0,
                        help="serve only the first N decoder layers (0: the whole SmolLM2-135M); for "
                        "debugging the protocol: a cut model's games all score the same, so the datum check fails")
    # A liveness guard, not a speed goal. Step 0 (server start to checkpoint) measured 380 s at load
    # ~7 with every executable in the persistent cache, 936-1039 s at load ~15, and over 1800 s at
    # load ~20: tracing, loading the cached executables and running them all share 2 busy cores.
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed for each run")
    parser.add_argument("--jax-cache", default="", metavar="DIR",
                        help="persistent JAX compilation cache (default: skyrl-tx/jax-cache in the TurnGym "
                        "cache, kept across runs; an empty folder measures a first run)")
    parser.add_argument("--backend-config", default="{}", metavar="JSON",
                        help=f"overrides of the server's backend config (default {json.dumps(BACKEND_CONFIG)})")
    parser.add_argument("--train-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="extra key for the training command (repeatable)")
    args = parser.parse_args(argv)
    # SIGTERM (and SIGINT, which a background job may have ignored) unwind through the cleanup
    # that stops the server and the training run this process started.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _interrupted)
    try:
        return run(args)
    except CheckFailed as exc:
        print(f"tinker_server=FAILED: {exc}", flush=True)
    except Exception as exc:  # e.g. an SDK error from the checks: the traceback, then one line
        import traceback

        traceback.print_exc()
        print(f"tinker_server=FAILED: {type(exc).__name__}: {exc}", flush=True)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
