"""Compute dtype of the local backend, chosen by measurement (``compute_dtype="auto"``).

Whether bfloat16 pays depends on the CPU: with AMX it ran 1.6x faster than float32 here, with
AVX512-BF16 alone 0.6x, and without native bfloat16 (AVX2) far slower. ``"auto"`` times a small
probe of what the backend does (a training pass under bfloat16 autocast and a sampling-sized
product with bfloat16 weights, against the same in float32), picks bfloat16 only when it is
clearly faster, caches the verdict on disk per machine (CPU model and flags, torch version,
thread count, probe version), and logs the choice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

COMPUTE_DTYPES = ("float32", "bfloat16")
"""Concrete compute dtypes of the local backend."""
COMPUTE_DTYPE_CHOICES = ("auto", *COMPUTE_DTYPES)
"""Accepted ``compute_dtype`` values (``auto`` resolves to one of :data:`COMPUTE_DTYPES`)."""
BFLOAT16_MIN_SPEEDUP = 1.15
"""bfloat16 is chosen only when the probe runs at least this much faster than float32 (it costs
precision: sampler and trainer logprobs then differ by ~1e-2 instead of ~1e-5)."""
CACHE_NAME = "compute_dtype.json"
PROBE_VERSION = "2"
"""Part of the cache key: verdicts of an earlier probe (2 threads, misled by load) are probed again."""


def check_compute_dtype(name: str, *, allow_auto: bool = False) -> str:
    """``name`` if it is an accepted compute dtype, else a one-line ``ValueError``."""
    allowed = COMPUTE_DTYPE_CHOICES if allow_auto else COMPUTE_DTYPES
    if name not in allowed:
        raise ValueError(f"compute_dtype must be one of {', '.join(allowed)}, got {name!r}")
    return name


def machine_fingerprint() -> dict[str, str]:
    """What the probe's verdict depends on: CPU model and flags, torch version, threads."""
    model = flags = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = value.strip()
    model = model or platform.processor() or platform.machine()
    return {
        "cpu": model,
        "flags": hashlib.blake2b(flags.encode(), digest_size=8).hexdigest(),
        "torch": torch.__version__,
        "threads": str(torch.get_num_threads()),
        "probe": PROBE_VERSION,
    }


def probe_bfloat16_speedup(repeats: int = 5) -> float:
    """float32 time / bfloat16 time of a probe shaped like the backend's work (> 1: bf16 faster).

    Probe: a 128-token training pass through one MLP-sized layer (forward and backward under
    bfloat16 autocast, float32 weights, as the trainer runs) plus a 32-row product with weights
    stored in bfloat16 (as the sampler runs); the float32 side runs the same shapes in float32.
    Both are warmed up, then timed alternately, one of each per repeat; the ratio is of the best
    times. The probe runs on one thread (restored after): the dtype changes the kernel, not how
    it scales across threads, and a multi-threaded kernel waits for its slowest thread, so on a
    loaded machine its time measures the neighbours (a 2-thread probe beside two training runs
    on an AMX machine read 0.37-0.77 where bfloat16 is 2-3x faster; one thread read 2.0-2.8).
    """
    gen = torch.Generator().manual_seed(0)
    hidden, inner = 576, 1536
    w_up = torch.randn(inner, hidden, generator=gen) * 0.02
    w_down = torch.randn(hidden, inner, generator=gen) * 0.02
    x_train = torch.randn(128, hidden, generator=gen)
    x_sample = torch.randn(32, hidden, generator=gen)
    w_up_bf, w_down_bf = w_up.bfloat16(), w_down.bfloat16()

    def train_pass(bf16: bool) -> None:
        x = x_train.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            y = torch.nn.functional.linear(
                torch.nn.functional.silu(torch.nn.functional.linear(x, w_up)), w_down
            )
        y.float().square().mean().backward()

    def sample_pass(bf16: bool) -> None:
        with torch.inference_mode():
            x = x_sample.bfloat16() if bf16 else x_sample
            up, down = (w_up_bf, w_down_bf) if bf16 else (w_up, w_down)
            torch.nn.functional.linear(torch.nn.functional.linear(x, up), down)

    def timed(bf16: bool) -> float:
        t0 = time.perf_counter()
        train_pass(bf16)
        sample_pass(bf16)
        return time.perf_counter() - t0

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for bf16 in (False, True, False, True):  # warm-up: first-call allocations, kernel selection
            timed(bf16)
        fp32 = bf16 = float("inf")
        for _ in range(max(1, repeats)):
            fp32 = min(fp32, timed(False))
            bf16 = min(bf16, timed(True))
            if fp32 / bf16 < 0.4:  # clearly slower (no native bfloat16): no need to confirm
                break
    finally:
        torch.set_num_threads(threads)
    return fp32 / bf16


def cache_file() -> Path:
    """Where probe verdicts are kept (``<turngym cache>/compute_dtype.json``)."""
    from backend.model import cache_dir

    return cache_dir() / CACHE_NAME


def _read(path: Path) -> dict[str, dict[str, object]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, data: dict[str, dict[str, object]]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".compute_dtype-", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as e:  # a read-only cache only costs a probe next time
        logger.warning("could not cache the compute dtype probe in %s: %s", path, e)


def resolve_compute_dtype(name: str, *, path: Path | None = None) -> str:
    """The concrete compute dtype for ``name``: ``name`` itself, or the probe's choice for ``"auto"``."""
    check_compute_dtype(name, allow_auto=True)
    if name != "auto":
        return name
    path = path or cache_file()
    fingerprint = machine_fingerprint()
    key = json.dumps(fingerprint, sort_keys=True)
    cached = _read(path).get(key)
    if isinstance(cached, dict) and cached.get("dtype") in COMPUTE_DTYPES:
        dtype, speedup, how = str(cached["dtype"]), cached.get("bfloat16_speedup"), f"cached in {path}"
    else:
        t0 = time.perf_counter()
        speedup = probe_bfloat16_speedup()
        dtype = "bfloat16" if speedup >= BFLOAT16_MIN_SPEEDUP else "float32"
        how = f"probed in {time.perf_counter() - t0:.1f} s"
        data = _read(path)
        data[key] = {"dtype": dtype, "bfloat16_speedup": round(speedup, 3), **fingerprint}
        _write(path, data)
    shown = f"{speedup:.2f}x" if isinstance(speedup, (int, float)) else "?"
    logger.info(
        "local compute dtype: auto -> %s (bfloat16 runs %s as fast as float32 on %s; %s)",
        dtype,
        shown,
        fingerprint["cpu"] or "this CPU",
        how,
    )
    return dtype
