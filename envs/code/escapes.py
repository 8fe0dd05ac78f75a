"""Escape attempts against a :class:`~envs.code.sandbox.Sandbox`, run for real and judged.

Each :class:`EscapeAttempt` is a program that tries something the sandbox must stop: read or
write outside its folder, reach a loopback port that the harness itself listens on (TCP and
UDP, through ``socket`` and through raw ``ctypes`` calls), signal or read the harness process,
gain a privilege, fork-bomb, allocate 10 GB, loop forever, print 100 MB, fill the disk, leave a
daemon behind. :func:`run_escape_attempts` runs them and returns one :class:`EscapeOutcome`
each: *escaped* when the forbidden effect was observed (the program printed its ``ESCAPED``
marker, which it does only after the forbidden operation succeeded; the listener got a
connection or a datagram; a file appeared outside; a process of the run outlived it; its
working folder was left behind; the output went past the cap; the run was not stopped in time),
*stopped* when the run ended as a failed tool call. Network traffic goes to loopback only.

The bench (``bench/fuzz_envs.py``) and the tests use the same attempts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Listener, SocketAttribute, SocketStream, UDPSocket

from envs.code.sandbox import Isolation, RunResult, RunStatus, Sandbox

__all__ = ["ESCAPE_ATTEMPTS", "EscapeAttempt", "EscapeOutcome", "leftover_processes", "run_escape_attempts"]

MARKER = "ESCAPED"


@dataclass(frozen=True)
class EscapeAttempt:
    """One program that tries to get out of (or to overrun) the sandbox."""

    name: str
    """Short name."""
    code: str
    """The program; ``{port}``, ``{udp_port}``, ``{secret}``, ``{outside}``, ``{repo_file}``
    and ``{pid}`` are filled in (``str.format``)."""
    must_fail: bool = True
    """The run must end as a failed tool call (False: a clean exit is fine, e.g. a daemon
    whose parent exits 0; only its effect counts)."""
    modes: tuple[Isolation, ...] = (Isolation.NAMESPACES, Isolation.LANDLOCK, Isolation.RLIMITS)
    """The isolation modes that claim to stop it."""


ESCAPE_ATTEMPTS: tuple[EscapeAttempt, ...] = (
    EscapeAttempt("read_etc_passwd", 'data = open("/etc/passwd").read()\nprint("ESCAPED", len(data))'),
    EscapeAttempt("read_repo_file", 'data = open({repo_file!r}).read()\nprint("ESCAPED", len(data))'),
    EscapeAttempt("read_secret_file", 'print("ESCAPED", open({secret!r}).read())'),
    EscapeAttempt(
        "read_via_symlink", 'import os\nos.symlink({secret!r}, "link")\nprint("ESCAPED", open("link").read())'
    ),
    EscapeAttempt(
        "list_host_root",
        'import os\nnames = os.listdir("/")\nif "etc" in names:\n    print("ESCAPED", names)\n'
        'else:\n    raise SystemExit("the host root is not visible")',
    ),
    EscapeAttempt("write_outside", 'open({outside!r} + "/pwned", "w").write("x")\nprint("ESCAPED")'),
    EscapeAttempt(
        "exec_cat_passwd",
        'import subprocess\nout = subprocess.run(["cat", "/etc/passwd"], capture_output=True, check=True).stdout\n'
        'print("ESCAPED", len(out))',
    ),
    EscapeAttempt("read_harness_environ", 'open("/proc/{pid}/environ", "rb").read()\nprint("ESCAPED")'),
    EscapeAttempt("signal_harness", 'import os\nos.kill({pid}, 0)\nprint("ESCAPED")'),
    EscapeAttempt(
        "tcp_loopback",
        'import socket\ns = socket.create_connection(("127.0.0.1", {port}), timeout=2)\ns.sendall(b"hello")\n'
        'print("ESCAPED")',
    ),
    EscapeAttempt(
        "udp_loopback",
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        's.sendto(b"hello", ("127.0.0.1", {udp_port}))\nprint("ESCAPED")',
    ),
    EscapeAttempt(
        "ctypes_tcp_loopback",
        "import ctypes, struct\nlibc = ctypes.CDLL(None, use_errno=True)\nfd = libc.socket(2, 1, 0)\n"
        'assert fd >= 0, "socket refused"\n'
        'addr = struct.pack("<H", 2) + struct.pack("!H", {port}) + bytes([127, 0, 0, 1]) + bytes(8)\n'
        'assert libc.connect(fd, addr, 16) == 0, "connect refused"\nlibc.send(fd, b"hello", 5, 0)\n'
        'print("ESCAPED")',
    ),
    EscapeAttempt(
        "ctypes_user_namespace",
        'import ctypes\nlibc = ctypes.CDLL(None)\nassert libc.unshare(0x10000000) == 0, "unshare refused"\n'
        'print("ESCAPED")',
        modes=(Isolation.NAMESPACES, Isolation.LANDLOCK),
    ),
    EscapeAttempt(
        "privileged_chown",
        'import os\nopen("f", "w").close()\nos.chown("f", 12345, 12345)\nprint("ESCAPED")',
    ),
    EscapeAttempt(
        "fork_bomb", "import os\nwhile True:\n    os.fork()", modes=(Isolation.NAMESPACES, Isolation.LANDLOCK)
    ),
    EscapeAttempt(
        "fork_bomb_resilient",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        modes=(Isolation.NAMESPACES, Isolation.LANDLOCK),
    ),
    EscapeAttempt(
        "daemon",
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n"
        "    os._exit(0)\nprint('parent exits')",
        must_fail=False,
        modes=(Isolation.NAMESPACES, Isolation.LANDLOCK),
    ),
    EscapeAttempt(
        "thread_bomb",
        "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()",
    ),
    EscapeAttempt("alloc_10gb", 'b = bytearray(10 * 1024**3)\nprint("ESCAPED")'),
    EscapeAttempt(
        "alloc_10gb_touched",
        'chunks = []\nfor _ in range(100):\n    chunks.append(b"x" * (100 * 1024 * 1024))\nprint("ESCAPED")',
    ),
    EscapeAttempt("infinite_loop", "while True:\n    pass"),
    EscapeAttempt("sleep_forever", "import time\ntime.sleep(10**6)"),
    EscapeAttempt("print_100mb", 'import sys\nfor _ in range(100):\n    sys.stdout.write("x" * (1 << 20))'),
    EscapeAttempt("stderr_100mb", 'import sys\nfor _ in range(100):\n    sys.stderr.write("y" * (1 << 20))'),
    EscapeAttempt("big_file", 'open("big", "wb").write(b"x" * (256 << 20))\nprint("ESCAPED")'),
    EscapeAttempt(
        "fill_disk",
        'for i in range(1000):\n    with open(f"f{{i}}", "wb") as f:\n        f.write(b"x" * (1 << 20))\n'
        'print("ESCAPED")',
        modes=(Isolation.NAMESPACES,),  # the only mode with a disk quota (a tmpfs of disk_mb)
    ),
)
"""Every attempt (see the module docstring)."""


@dataclass(frozen=True)
class EscapeOutcome:
    """What one attempt achieved."""

    name: str
    """The attempt."""
    result: RunResult
    """The sandbox's answer."""
    escaped: bool
    """A forbidden effect was observed."""
    stopped: bool
    """The run ended as a failed tool call (or the attempt need not fail)."""
    evidence: list[str] = field(default_factory=list)
    """What was observed (empty when nothing escaped)."""

    @property
    def held(self) -> bool:
        """Nothing escaped and the run was stopped."""
        return not self.escaped and self.stopped


def leftover_processes(result: RunResult) -> list[int]:
    """Pids of processes of a finished run still alive: its user id (``namespaces`` mode) or
    its working folder in their command line (every process the sandbox script started)."""
    found: list[int] = []
    needle = result.workdir.encode() if result.workdir else None
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if result.uid is not None and entry.stat().st_uid == result.uid:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    if b") Z" not in f.read():  # a zombie is dead (its parent reaps it)
                        found.append(int(entry.name))
                continue
            if needle:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    if needle in f.read():
                        found.append(int(entry.name))
        except OSError:
            continue
    return found


class _Targets:
    """What the attempts aim at: loopback listeners, a secret file, a folder outside."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="turngym-escape-targets-"))
        self.secret = self.root / "secret.txt"
        self.secret.write_text("turngym-secret-token\n")
        self.secret.chmod(0o644)
        self.outside = self.root / "outside"
        self.outside.mkdir()
        self.outside.chmod(0o777)
        self.tcp_hits: list[str] = []
        self.udp_hits: list[str] = []
        self.port = 0
        self.udp_port = 0

    def fields(self) -> dict[str, object]:
        return {
            "port": self.port,
            "udp_port": self.udp_port,
            "secret": str(self.secret),
            "outside": str(self.outside),
            "repo_file": str(Path(__file__).resolve()),
            "pid": os.getpid(),
        }

    async def serve_tcp(self, listener: Listener[SocketStream]) -> None:
        async def handle(stream: SocketStream) -> None:
            self.tcp_hits.append("tcp connection")
            async with stream:
                with contextlib.suppress(Exception):
                    await stream.receive()

        await listener.serve(handle)

    async def serve_udp(self, udp: UDPSocket) -> None:
        async for _packet, _addr in udp:
            self.udp_hits.append("udp datagram")

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


async def run_escape_attempts(
    sandbox: Sandbox,
    attempts: Sequence[EscapeAttempt] = ESCAPE_ATTEMPTS,
    *,
    concurrency: int = 2,
) -> list[EscapeOutcome]:
    """Run ``attempts`` (those the sandbox's isolation claims to stop) against ``sandbox``,
    ``concurrency`` at a time, and judge each (see the module docstring)."""
    mode = await sandbox.isolation()
    chosen = [a for a in attempts if mode in a.modes]
    targets = _Targets()
    outcomes: list[EscapeOutcome | None] = [None] * len(chosen)
    limiter = anyio.Semaphore(concurrency)
    try:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        udp = await anyio.create_udp_socket(family=socket.AF_INET, local_host="127.0.0.1")
        async with listener, udp:  # closed however the attempts end (no socket left to the GC)
            targets.port = int(listener.extra(SocketAttribute.local_port))
            targets.udp_port = int(udp.extra(SocketAttribute.local_port))
            async with anyio.create_task_group() as servers:
                servers.start_soon(targets.serve_tcp, listener)
                servers.start_soon(targets.serve_udp, udp)

                async def one(i: int, attempt: EscapeAttempt) -> None:
                    async with limiter:
                        outcomes[i] = await _attempt(sandbox, attempt, targets)

                async with anyio.create_task_group() as tg:
                    for i, attempt in enumerate(chosen):
                        tg.start_soon(one, i, attempt)
                servers.cancel_scope.cancel()
    finally:
        targets.close()
    return [o for o in outcomes if o is not None]


async def _attempt(sandbox: Sandbox, attempt: EscapeAttempt, targets: _Targets) -> EscapeOutcome:
    tcp_before, udp_before = len(targets.tcp_hits), len(targets.udp_hits)
    code = attempt.code.format(**targets.fields())
    result = await sandbox.run(code)
    await anyio.sleep(0.05)  # a datagram or connection in flight lands
    evidence: list[str] = []
    limits = sandbox.config.limits
    if any(line.startswith(MARKER) for line in result.output.splitlines()):
        evidence.append(f"printed {MARKER}")
    if attempt.name.startswith(("tcp", "ctypes_tcp")) and len(targets.tcp_hits) > tcp_before:
        evidence.append("the loopback listener accepted a connection")
    if attempt.name.startswith("udp") and len(targets.udp_hits) > udp_before:
        evidence.append("the loopback socket received a datagram")
    if (targets.outside / "pwned").exists():
        evidence.append("a file appeared outside the sandbox")
        (targets.outside / "pwned").unlink()
    if len(result.output.encode()) > limits.output_bytes:
        evidence.append(f"{len(result.output.encode())} bytes of output kept (cap {limits.output_bytes})")
    if result.seconds > limits.timeout_s + 5.0:
        evidence.append(f"ran {result.seconds:.1f}s (limit {limits.timeout_s:g}s)")
    deadline = time.monotonic() + 2.0
    left = await anyio.to_thread.run_sync(leftover_processes, result)
    while left and time.monotonic() < deadline:  # a killed process may take a moment to go
        await anyio.sleep(0.05)
        left = await anyio.to_thread.run_sync(leftover_processes, result)
    if left:
        evidence.append(f"processes outlived the run: {left[:5]}")
    if result.workdir and os.path.exists(result.workdir):
        evidence.append(f"working folder left behind: {result.workdir}")
    stopped = result.status is not RunStatus.OK or not attempt.must_fail
    return EscapeOutcome(attempt.name, result, bool(evidence), stopped, evidence)
