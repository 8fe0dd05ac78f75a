"""The code sandbox: runs code, enforces every limit, and holds against real escape attempts
(with the audit hook off, so the kernel's layers are what is tested), leaving nothing behind."""

from __future__ import annotations

import gc
import os
import pickle
import sys
import warnings
from pathlib import Path

import anyio
import pytest

from envs.code.escapes import ESCAPE_ATTEMPTS, leftover_processes, run_escape_attempts
from envs.code.sandbox import (
    Isolation,
    RunStatus,
    Sandbox,
    SandboxConfig,
    SandboxLimits,
    SandboxUnavailable,
    _autogroup_nice,
    _probe_lock,
    _probes,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux-only")

QUICK = SandboxLimits(timeout_s=1.5)


def _sandbox(tmp_path: Path, **kw: object) -> Sandbox:
    kw.setdefault("limits", QUICK)
    return Sandbox(SandboxConfig(tmp_dir=str(tmp_path), **kw))  # type: ignore[arg-type]


def _run(sandbox: Sandbox, code: str):
    return anyio.run(sandbox.run, code)


def _strong_modes() -> list[Isolation]:
    async def probe() -> list[Isolation]:
        out = []
        for mode in (Isolation.NAMESPACES, Isolation.LANDLOCK):
            if await Sandbox(SandboxConfig(isolation=mode))._probe(mode) is None:
                out.append(mode)
        return out

    return anyio.run(probe)


STRONG = _strong_modes()


def test_a_strong_isolation_works_here() -> None:
    """``auto`` must find namespaces or Landlock on the machines we test on; a machine with
    neither would fail here (with each mode's reason), never pass silently."""
    mode = anyio.run(Sandbox().isolation)
    assert mode in (Isolation.NAMESPACES, Isolation.LANDLOCK)
    assert mode == STRONG[0]


@pytest.mark.skipif(Isolation.NAMESPACES not in STRONG, reason="namespaces mode is not available here")
def test_a_user_id_comes_back_only_after_many_runs(tmp_path: Path) -> None:
    # the escape judge tells a run's processes by its user id: the next run must not reuse it
    sandbox = _sandbox(tmp_path, isolation=Isolation.NAMESPACES)

    async def runs() -> list[int | None]:
        return [(await sandbox.run("pass")).uid for _ in range(3)]

    uids = anyio.run(runs)
    assert None not in uids and len(set(uids)) == 3


@pytest.mark.parametrize("mode", STRONG)
def test_runs_code_and_reports_how_it_ended(mode: Isolation, tmp_path: Path) -> None:
    sandbox = _sandbox(tmp_path, isolation=mode)
    ok = _run(sandbox, "import math, sys\nprint(math.factorial(20))\nprint('é ✓', file=sys.stderr)")
    assert ok.status is RunStatus.OK and ok.exit_code == 0 and ok.ok
    assert ok.output == "2432902008176640000\né ✓\n"
    error = _run(sandbox, "x = 1\nraise ValueError('bad value')")
    assert error.status is RunStatus.ERROR and error.exit_code == 1
    assert 'File "<code>", line 2' in error.output and "raise ValueError('bad value')" in error.output
    assert error.output.rstrip().endswith("ValueError: bad value")
    assert "_sandbox_child" not in error.output  # only the code's own frames
    assert _run(sandbox, "raise SystemExit(3)").exit_code == 3
    assert _run(sandbox, "import sys\nsys.exit()").status is RunStatus.OK
    syntax = _run(sandbox, "def f(:\n    pass")
    assert syntax.status is RunStatus.ERROR and "SyntaxError" in syntax.output
    files = _run(sandbox, "open('a.txt', 'w').write('kept')\nprint(open('a.txt').read())")
    assert files.output == "kept\n"
    assert _run(sandbox, "import os\nprint(os.listdir('.'))").output == "[]\n"  # a fresh folder per run
    assert os.listdir(tmp_path) == []  # every working folder removed


@pytest.mark.parametrize("mode", STRONG)
def test_limits_end_the_run_as_a_failed_call(mode: Isolation, tmp_path: Path) -> None:
    # 4 s: the memory case must fail by memory, not by time, even when starting the sandboxed
    # interpreter is slow (on a loaded 2-core machine it took more than 1 s)
    limits = SandboxLimits(timeout_s=4.0, memory_mb=256, output_bytes=1000, max_code_bytes=200)
    sandbox = _sandbox(tmp_path, isolation=mode, limits=limits)

    async def main():
        async with anyio.create_task_group() as tg:
            results = {}

            async def one(name: str, code: str) -> None:
                results[name] = await sandbox.run(code)

            tg.start_soon(one, "loop", "while True:\n    pass")
            tg.start_soon(one, "output", "print('x' * 5000)")
            tg.start_soon(one, "memory", "b = bytearray(1024**3)")
            tg.start_soon(one, "long", "x = 1\n" * 100)
        return results

    results = anyio.run(main)
    assert results["loop"].status is RunStatus.TIMEOUT and "time limit of 4 s" in results["loop"].detail
    out = results["output"]
    assert out.status is RunStatus.OUTPUT_LIMIT and out.truncated and len(out.output) == 1000
    assert results["memory"].status is RunStatus.MEMORY and "MemoryError" in results["memory"].output
    assert results["long"].status is RunStatus.ERROR and "longer than 200 bytes" in results["long"].detail
    assert sandbox.stats.runs == 4 and sandbox.stats.timeouts == 1 and sandbox.stats.memory == 1
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("mode", STRONG)
def test_escape_attempts_are_stopped_by_the_kernel_layers(mode: Isolation, tmp_path: Path) -> None:
    """Every attempt with the audit hook off: what stops it is the namespaces / Landlock /
    seccomp / rlimits layer. Nothing escapes, every run fails, nothing is left behind."""
    limits = SandboxLimits(timeout_s=4.0)  # 4 s: allocations fail by memory, not by a slow start
    sandbox = _sandbox(tmp_path, isolation=mode, audit_hook=False, limits=limits, concurrency=4)
    outcomes = anyio.run(lambda: run_escape_attempts(sandbox, concurrency=4))
    assert len(outcomes) == len([a for a in ESCAPE_ATTEMPTS if mode in a.modes]) >= 20
    broken = {o.name: (o.result.status, o.result.detail, o.evidence) for o in outcomes if not o.held}
    assert not broken, broken
    by_name = {o.name: o.result for o in outcomes}
    assert by_name["infinite_loop"].status is RunStatus.TIMEOUT
    assert by_name["print_100mb"].status is RunStatus.OUTPUT_LIMIT
    assert by_name["alloc_10gb"].status is RunStatus.MEMORY
    assert all(r.status is not RunStatus.SANDBOX_ERROR for r in by_name.values())
    assert os.listdir(tmp_path) == []


def test_the_audit_hook_stops_the_run_with_a_reason(tmp_path: Path) -> None:
    sandbox = _sandbox(tmp_path)
    passwd = _run(sandbox, "print(open('/etc/passwd').read())")
    assert passwd.status is RunStatus.VIOLATION
    assert passwd.detail == "stopped by the sandbox: blocked open('/etc/passwd')"
    net = _run(sandbox, "import socket\nsocket.create_connection(('127.0.0.1', 9))")
    assert net.status is RunStatus.VIOLATION and "socket" in net.detail
    assert _run(sandbox, "import ctypes").status is RunStatus.VIOLATION
    caught = _run(sandbox, "try:\n    open('/etc/hostname')\nexcept BaseException:\n    print('caught')")
    assert caught.status is RunStatus.VIOLATION and "caught" not in caught.output  # cannot be caught


def test_a_cancelled_run_is_killed_and_cleaned_up(tmp_path: Path) -> None:
    sandbox = _sandbox(tmp_path, limits=SandboxLimits(timeout_s=30.0))
    seen = []

    async def main() -> None:
        real = sandbox.run

        async def spy(code: str):
            result = await real(code)
            seen.append(result)
            return result

        with anyio.move_on_after(1.0):
            await spy("import time\nprint('started', flush=True)\ntime.sleep(60)")

    anyio.run(main)
    assert not seen  # cancelled before it returned
    assert os.listdir(tmp_path) == []  # the working folder went with it
    marker = str(tmp_path).encode()
    left = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline_has(p, marker)]
    assert not left


def _cmdline_has(pid: str, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return needle in f.read()
    except OSError:
        return False


def test_no_process_of_a_run_outlives_it(tmp_path: Path) -> None:
    sandbox = _sandbox(tmp_path)
    result = _run(sandbox, "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint('parent done')")
    assert result.output.startswith("parent done") or result.status is not RunStatus.OK
    assert leftover_processes(result) == []


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="no sched_autogroup here")
def test_a_run_is_niced_inside_its_own_autogroup_too(tmp_path: Path) -> None:
    """A run is a session of its own, so under sched_autogroup its process nice counts only inside
    its own autogroup: that autogroup's nice must be ours + ``nice``, or the run would compete
    with the event loop's process as an equal."""
    sandbox = _sandbox(tmp_path, isolation=Isolation.RLIMITS, audit_hook=False, nice=7)
    ours = _autogroup_nice()
    if ours is None:  # the file is there but says nothing (some containers): nothing to carry over
        pytest.skip(f"/proc/self/autogroup has no nice here: {Path('/proc/self/autogroup').read_text()!r}")
    result = _run(sandbox, "import os\nprint(open('/proc/self/autogroup').read().split()[-1], os.nice(0))")
    assert result.ok, result
    assert result.output.split() == [str(min(19, ours + 7)), str(min(19, os.nice(0) + 7))]


def test_a_run_is_niced_where_its_autogroup_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``/proc/self/autogroup`` is missing or empty (CI's container has it empty) the run still
    starts, with its process nice raised, and no autogroup nice is sent to it."""
    monkeypatch.setattr("envs.code.sandbox._autogroup_nice", lambda: None)
    sandbox = _sandbox(tmp_path, isolation=Isolation.RLIMITS, audit_hook=False, nice=7)
    result = _run(sandbox, "import os\nprint(os.nice(0))")
    assert result.ok, result
    assert result.output.split() == [str(min(19, os.nice(0) + 7))]


def test_autogroup_nice_is_none_for_an_empty_or_odd_file(tmp_path: Path) -> None:
    fake = tmp_path / "autogroup"
    for text, want in [("", None), ("/autogroup-12 nice", None), ("/autogroup-12 nice 3\n", 3)]:
        fake.write_text(text)
        assert _autogroup_nice(str(fake)) == want, text
    assert _autogroup_nice(str(tmp_path / "missing")) is None


def test_an_unavailable_isolation_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with _probe_lock:
        saved = dict(_probes)
    monkeypatch.setattr(
        "envs.code.sandbox._probes", {Isolation.NAMESPACES: "needs root", Isolation.LANDLOCK: "old kernel"}
    )
    with pytest.raises(SandboxUnavailable) as info:
        anyio.run(Sandbox().run, "print(1)")
    message = str(info.value)
    assert "\n" not in message
    assert "namespaces: needs root" in message and "landlock: old kernel" in message
    assert "isolation='rlimits'" in message
    assert saved == _probes  # the real cache is untouched


def test_config_is_validated_and_the_sandbox_pickles_as_its_config() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        SandboxLimits(timeout_s=0)
    with pytest.raises(ValueError, match="max_code_bytes"):
        SandboxLimits(max_code_bytes=100_000)
    with pytest.raises(ValueError):
        SandboxConfig(isolation="chroot")  # type: ignore[arg-type]
    sandbox = Sandbox(SandboxConfig(limits=SandboxLimits(timeout_s=2.0), concurrency=3))
    copy = pickle.loads(pickle.dumps(sandbox))
    assert copy.config == sandbox.config and copy is not sandbox


def test_the_escape_harness_closes_its_loopback_sockets(tmp_path: Path) -> None:
    """Its TCP listener and UDP socket are closed when the attempts end, not left to the garbage
    collector (an unclosed socket's ResourceWarning then surfaced in whichever later test ran the
    collection: gymnasium's check_env in test_gym, which fails on any warning)."""
    sandbox = _sandbox(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert anyio.run(lambda: run_escape_attempts(sandbox, attempts=())) == []
        gc.collect()
    assert not [str(w.message) for w in caught if "unclosed" in str(w.message)]
