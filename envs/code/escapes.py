"""Escape attempts against a :class:`~envs.code.sandbox.Sandbox`, run for real and judged from outside.

Each :class:`EscapeAttempt` is a program that tries something the sandbox must stop: read or
write outside its folder; reach a loopback port or a unix datagram socket the harness listens
on; act on processes outside the run (the harness's rlimits, priority, affinity, scheduler and
I/O priority, the supervisor); climb back above the priority the run was given (lower its nice,
raise its ``RLIMIT_NICE``, start a session: an autogroup of its own); change or read an outside file's metadata; read the harness's
System V shared memory or leave a segment behind; hold memory outside its address space
(memory-backed files, shared memory); choose its own status (exit codes, ``SystemExit(256)``,
``SIGSYS``); trap the clean-up (links in read-only folders, deep trees, mode-000 folders); find
the harness's process; gain a privilege; fork-bomb, allocate 10 GB, loop forever, print 100 MB,
fill the disk, leave a daemon behind. :func:`run_escape_attempts` runs them and returns one
:class:`EscapeOutcome` each: *escaped* when a forbidden effect was observed by the harness
itself (the listener or socket got something; the harness's own state (:func:`harness_state`)
or the outside file changed; the harness's secret segment content or pid or the file's inode
number appeared in the output, which the program could not know otherwise; the host's shared
memory grew past the run's bound; a segment was left; the status was not the expected one or a
sandbox error; a process of the run outlived it; its working folder was left behind or the
clean-up reported a problem; the output went past the cap; the run was not stopped in time),
or the program printed its ``ESCAPED`` marker after a forbidden call succeeded; *stopped* when
the run ended as a failed tool call. Attempts a mode is documented not to stop
(:attr:`EscapeAttempt.gaps`) run too and are reported apart (:attr:`EscapeOutcome.known_gap`).
Network traffic goes to loopback only.

The bench (``bench/code_sandbox.py``) and the tests use the same attempts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import secrets
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Listener, SocketAttribute, SocketStream, UDPSocket

from envs.code import sandbox as sandbox_module
from envs.code.sandbox import Isolation, RunResult, RunStatus, Sandbox

__all__ = [
    "ESCAPE_ATTEMPTS",
    "EscapeAttempt",
    "EscapeOutcome",
    "harness_state",
    "leftover_processes",
    "run_escape_attempts",
]

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
    modes: tuple[Isolation, ...] = (
        Isolation.NAMESPACES,
        Isolation.USERNS,
        Isolation.LANDLOCK,
        Isolation.RLIMITS,
    )
    """The isolation modes that claim to stop it."""
    gaps: tuple[Isolation, ...] = ()
    """Modes known not to stop it (their documented limitations): run too, reported apart."""
    status: RunStatus | None = None
    """The status the run must end with (forged statuses: the code's exit must not choose it)."""
    forbidden: tuple[RunStatus, ...] = ()
    """Statuses the run must not end with (the code tries to choose one of them)."""


_STRONG = (Isolation.NAMESPACES, Isolation.USERNS, Isolation.LANDLOCK)
_LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"

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
        modes=_STRONG,
    ),
    EscapeAttempt(
        "privileged_chown",
        'import os\nopen("f", "w").close()\nos.chown("f", 12345, 12345)\nprint("ESCAPED")',
    ),
    EscapeAttempt("fork_bomb", "import os\nwhile True:\n    os.fork()", modes=_STRONG),
    EscapeAttempt(
        "fork_bomb_resilient",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "daemon",
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(600)\n"
        "    os._exit(0)\nprint('parent exits')",
        must_fail=False,
        modes=_STRONG,
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
    # --- processes outside the run: the harness (``{pid}``) and the run's own supervisor
    EscapeAttempt(
        "prlimit_harness",
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.prlimit({pid}, resource.RLIMIT_NOFILE, (64, hard))\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "prlimit_harness_cpu",  # a soft limit far away: seen, harmless if it gets through
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
        "resource.prlimit({pid}, resource.RLIMIT_CPU, (100000, hard))\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "prlimit_spawner",
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.prlimit({spawner_pid}, resource.RLIMIT_NOFILE, (64, hard))\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "setpriority_spawner",
        "import os\nos.setpriority(os.PRIO_PROCESS, {spawner_pid}, 19)\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "setpriority_supervisor",
        "import os\nppid = os.getppid()\nassert ppid > 1, 'no supervisor in sight'\n"
        "os.setpriority(os.PRIO_PROCESS, ppid, 19)\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "affinity_supervisor",
        "import os\nppid = os.getppid()\nassert ppid > 1, 'no supervisor in sight'\n"
        "os.sched_setaffinity(ppid, {{min(os.sched_getaffinity(0))}})\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "prlimit_supervisor_cpu",
        "import os, resource\nresource.prlimit(os.getppid(), resource.RLIMIT_CPU, (0, 0))",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "kill_supervisor",
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "kill_process_group", "import os, signal\nos.kill(0, signal.SIGKILL)", must_fail=False, modes=_STRONG
    ),
    EscapeAttempt(
        "setpriority_harness",
        "import os\nos.setpriority(os.PRIO_PROCESS, {pid}, 19)\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "setpriority_user",
        "import os\nos.setpriority(os.PRIO_USER, os.getuid(), 19)",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "setpriority_group", "import os\nos.setpriority(os.PRIO_PGRP, 0, 19)", must_fail=False, modes=_STRONG
    ),
    EscapeAttempt(
        "sigio_owner_harness",  # the kernel would signal the owner when the pipe gets data
        "import fcntl, os\nr, w = os.pipe()\nfcntl.fcntl(r, fcntl.F_SETOWN, {pid})\nprint('ESCAPED')",
        modes=(Isolation.LANDLOCK,),  # elsewhere the harness's pid names no process of the run's
    ),
    EscapeAttempt(
        "affinity_harness",
        "import os\nos.sched_setaffinity({pid}, {{min(os.sched_getaffinity(0))}})\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "scheduler_harness",
        "import os\nos.sched_setscheduler({pid}, os.SCHED_IDLE, os.sched_param(0))\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "ioprio_harness",
        _LIBC
        + "assert libc.syscall(251, 1, {pid}, (3 << 13) | 7) == 0, ctypes.get_errno()\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    # --- the run's own priority: it is scheduled below the harness and must stay there
    EscapeAttempt(
        "lower_own_nice",
        "import os\nn = os.getpriority(os.PRIO_PROCESS, 0)\nos.setpriority(os.PRIO_PROCESS, 0, n - 1)\n"
        "print('ESCAPED', n)",
    ),
    EscapeAttempt(
        "raise_nice_limit",
        "import os, resource\nresource.setrlimit(resource.RLIMIT_NICE, (40, 40))\n"
        "os.setpriority(os.PRIO_PROCESS, 0, -20)\nprint('ESCAPED')",
    ),
    EscapeAttempt(
        "new_session_autogroup",  # a session is an autogroup of its own: the harness's equal
        "import os\nr, w = os.pipe()\ntry:\n    pid = os.fork()\nexcept OSError:\n    pid = None\n"
        "if not pid:\n    try:\n        os.setsid()\n        os.write(w, b'1')\n    except OSError:\n"
        "        os.write(w, b'0')\n    if pid == 0:\n        os._exit(0)\nelse:\n    os.waitpid(pid, 0)\n"
        "if os.read(r, 1) == b'1':\n    print('ESCAPED')\nelse:\n    raise SystemExit('no new session')",
        modes=_STRONG,
    ),
    # --- metadata of files outside the folder (``{secret}``)
    EscapeAttempt("chmod_outside", "import os\nos.chmod({secret!r}, 0o777)\nprint('ESCAPED')", modes=_STRONG),
    EscapeAttempt(
        "utime_outside", "import os\nos.utime({secret!r}, (0, 0))\nprint('ESCAPED')", modes=_STRONG
    ),
    EscapeAttempt(
        "setxattr_outside",
        "import os\nos.setxattr({secret!r}, 'user.turngym', b'x')\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "chmod_outside_dir_fd",
        "import os\nfd = os.open(os.path.dirname({secret!r}), os.O_PATH)\n"
        "os.chmod(os.path.basename({secret!r}), 0o777, dir_fd=fd)\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "chown_outside",
        "import os\nos.chown({secret!r}, os.getuid(), os.getgid())\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "getxattr_outside",
        "import os\nprint('xattr', os.getxattr({secret!r}, 'user.turngym').decode())",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "stat_outside",
        "import os\nprint('inode', os.stat({secret!r}).st_ino)",
        must_fail=False,
        modes=(Isolation.NAMESPACES, Isolation.USERNS),
        gaps=(Isolation.LANDLOCK,),
    ),
    # --- System V IPC and host sockets
    EscapeAttempt(
        "sysv_shm_read",
        _LIBC + "libc.shmat.restype = ctypes.c_void_p\nshm = libc.shmget({shm_key}, 0, 0)\n"
        "assert shm >= 0, ctypes.get_errno()\naddr = libc.shmat(shm, None, 0o10000)\n"
        "assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()\n"
        "print('secret', ctypes.string_at(addr, 32).split(b'\\0')[0].decode())",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "sysv_shm_left_behind",
        _LIBC + "assert libc.shmget({leave_key}, 4096, 0o1666) >= 0, ctypes.get_errno()",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "unix_datagram_socketpair",
        "import socket\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "a.sendto(b'hello', {unix_path!r})\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "unix_datagram_socket",
        "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ns.sendto(b'hello', {unix_path!r})\n"
        "print('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "unix_datagram_sendmsg",
        "import socket\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "a.sendmsg([b'hello'], [], 0, {unix_path!r})\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "unix_datagram_sendmmsg",
        _LIBC
        + "import struct\nfds = (ctypes.c_int * 2)()\nassert libc.socketpair(1, 2, 0, fds) == 0, ctypes.get_errno()\n"
        "path = {unix_path!r}.encode()\naddr = ctypes.create_string_buffer((1).to_bytes(2, 'little') + path, 110)\n"
        "data = ctypes.create_string_buffer(b'hello')\niov = struct.pack('QQ', ctypes.addressof(data), 5)\n"
        "iov_buf = ctypes.create_string_buffer(iov, 16)\n"
        "hdr = struct.pack('QIxxxxQQQQixxxxIxxxx', ctypes.addressof(addr), 110, ctypes.addressof(iov_buf), 1, 0, 0, 0, 0)\n"
        "msgs = ctypes.create_string_buffer(hdr, len(hdr))\n"
        "assert libc.sendmmsg(fds[0], msgs, 1, 0) == 1, ctypes.get_errno()\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "unix_datagram_connect",
        "import socket\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "a.connect({unix_path!r})\na.send(b'hello')\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "sysv_msg_left_behind",
        _LIBC + "assert libc.msgget({leave_key}, 0o1666) >= 0, ctypes.get_errno()",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "sysv_sem_left_behind",
        _LIBC + "assert libc.semget({leave_key}, 1, 0o1666) >= 0, ctypes.get_errno()",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "unix_datagram_ctypes",
        _LIBC + "fds = (ctypes.c_int * 2)()\nassert libc.socketpair(1, 2, 0, fds) == 0, ctypes.get_errno()\n"
        "path = {unix_path!r}.encode()\naddr = (1).to_bytes(2, 'little') + path + bytes(108 - len(path))\n"
        "assert libc.sendto(fds[0], b'hello', 5, 0, addr, len(addr)) == 5, ctypes.get_errno()\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    # --- memory that is not address space (judged by the host's shared memory during the run)
    EscapeAttempt(
        "memfd_memory",
        "import os\nfd = os.memfd_create('m')\nchunk = b'x' * (64 << 20)\nfor _ in range(40):\n"
        "    os.write(fd, chunk)\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "sysv_shm_memory",
        _LIBC + "libc.shmat.restype = ctypes.c_void_p\nfor _ in range(10):\n"
        "    shm = libc.shmget(0, 256 << 20, 0o1600)\n    assert shm >= 0, ctypes.get_errno()\n"
        "    addr = libc.shmat(shm, None, 0)\n    ctypes.memset(addr, 1, 256 << 20)\n    libc.shmdt(ctypes.c_void_p(addr))\n"
        "print('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "pipe_buffer_memory",  # kernel memory: the marker says the pipes grew
        "import fcntl, os\npipes = [os.pipe() for _ in range(24)]\nfor r, w in pipes:\n"
        "    fcntl.fcntl(w, 1031, 1 << 20)\nos.set_blocking(pipes[0][1], False)\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "dev_shm_memory",
        "chunk = b'x' * (64 << 20)\nwith open('/dev/shm/turngym-escape', 'wb') as f:\n    for _ in range(40):\n"
        "        f.write(chunk)\nprint('ESCAPED')",
        modes=_STRONG,
    ),
    # --- forged statuses: the code's exit must read as an error, whatever its value or text
    *(
        EscapeAttempt(
            f"exit_{n}",
            f"import os\nprint('sandbox: blocked nothing')\nos._exit({n})",
            status=RunStatus.ERROR,
        )
        for n in (86, 87, 124, 125, 137)
    ),
    EscapeAttempt("system_exit_256", "raise SystemExit(256)", status=RunStatus.ERROR),
    EscapeAttempt("system_exit_minus_256", "raise SystemExit(-256)", status=RunStatus.ERROR),
    EscapeAttempt(
        "signal_self_sigsys",
        "import signal\nsignal.raise_signal(signal.SIGSYS)\nraise SystemExit(1)",
        modes=_STRONG,
        status=RunStatus.ERROR,
    ),
    EscapeAttempt(
        "signal_self_sigxcpu",  # a CPU-limit kill without the CPU time
        "import signal\nsignal.raise_signal(signal.SIGXCPU)\nraise SystemExit(1)",
        forbidden=(RunStatus.TIMEOUT, RunStatus.VIOLATION, RunStatus.SANDBOX_ERROR, RunStatus.MEMORY),
    ),
    EscapeAttempt(
        "child_signals_sigsys",  # a process of the run other than the runner
        "import os, signal\nif os.fork() == 0:\n    os.kill(os.getppid(), signal.SIGSYS)\n    os._exit(0)\n"
        "os.wait()\nraise SystemExit(1)",
        modes=(Isolation.NAMESPACES, Isolation.USERNS),
        status=RunStatus.ERROR,
    ),
    # --- the clean-up: traps in the working folder (judged: folder gone, secret unchanged)
    EscapeAttempt(
        "cleanup_link_in_read_only_folder",
        "import os\nos.mkdir('ro')\nos.symlink({secret!r}, 'ro/link')\nos.symlink('/', 'ro/root')\n"
        "os.chmod('ro', 0o500)",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "cleanup_deep_tree",
        "import os\nfd = os.open('.', os.O_RDONLY)\nfor _ in range(1200):\n    os.mkdir('d', dir_fd=fd)\n"
        "    fd2 = os.open('d', os.O_RDONLY, dir_fd=fd)\n    os.close(fd)\n    fd = fd2\nos.symlink({secret!r}, 'l', dir_fd=fd)\n"
        "raise SystemExit('deep tree built')",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "cleanup_mode_000_folders",
        "import os\nos.makedirs('a/b/c')\nopen('a/b/c/f', 'w').close()\nos.symlink({secret!r}, 'a/b/link')\n"
        "os.mkfifo('a/fifo')\nos.mkdir('z', 0)\nfor p in ('a/b/c', 'a/b', 'a'):\n    try:\n        os.chmod(p, 0)\n"
        "    except OSError:\n        pass\nraise SystemExit('traps set')",
        must_fail=False,
        modes=_STRONG,
    ),
    # --- process discovery (the harness's pid is not given: finding it is the escape)
    EscapeAttempt(
        "discover_by_listing_proc",
        "import os\nprint('pids', ' '.join(p for p in os.listdir('/proc') if p.isdigit()))",
        must_fail=False,
        modes=_STRONG,
    ),
    EscapeAttempt(
        "discover_by_priority_probe",
        "import os\nfound = []\nfor n in range(1, 1 << 17):\n    try:\n        os.getpriority(os.PRIO_PROCESS, n)\n"
        "        found.append(str(n))\n    except OSError:\n        pass\nprint('pids', ' '.join(found[:3000]))",
        must_fail=False,
        modes=_STRONG,
    ),
    *(
        EscapeAttempt(
            f"discover_by_{name}_probe",  # a pid answers unlike one that cannot exist: it exists
            f"import os\ndef probe(n):\n    try:\n        {call}\n        return 0\n"
            "    except OSError as e:\n        return e.errno\ncontrol = probe(4194303)\n"
            "found = [str(n) for n in range(1, 1 << 17) if probe(n) != control]\nprint('pids', ' '.join(found[:3000]))",
            must_fail=False,
            modes=_STRONG,
        )
        for name, call in (("kill", "os.kill(n, 0)"), ("sched", "os.sched_getscheduler(n)"))
    ),
    EscapeAttempt(
        "discover_by_stat_probe",
        "import os\nfound = []\nfor n in range(1, 1 << 17):\n    if os.path.exists(f'/proc/{{n}}'):\n"
        "        found.append(str(n))\nprint('pids', ' '.join(found[:3000]))",
        must_fail=False,
        modes=(Isolation.NAMESPACES, Isolation.USERNS),
        gaps=(Isolation.LANDLOCK,),
    ),
    # --- the audit hook switched off from inside: the kernel's layers must hold alone
    EscapeAttempt(
        "audit_hook_subinterpreter",  # audit hooks are per interpreter
        "import _xxsubinterpreters as interpreters\ninterp = interpreters.create()\n"
        'interpreters.run_string(interp, \'print("ESCAPED", len(open("/etc/passwd").read()))\')',
        modes=_STRONG,
    ),
    EscapeAttempt(
        "audit_hook_dir_fd",  # the hook resolves a path from the working folder, the kernel from the fd
        "import os\nos.makedirs('a/b/c')\nos.symlink('a/b/c', 'share')\nroot = os.open('/usr', os.O_PATH)\n"
        "fd = os.open('share/../../etc/passwd', os.O_RDONLY, dir_fd=root)\nprint('ESCAPED', len(os.read(fd, 4096)))",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "audit_hook_state",  # the hook's own state, reachable through the garbage collector
        "import gc\nfor obj in gc.get_objects():\n"
        "    if getattr(obj, '__name__', '') == 'hook' and getattr(obj, '__closure__', None):\n"
        "        for cell in obj.__closure__:\n"
        "            try:\n                if cell.cell_contents == [False]:\n                    cell.cell_contents[0] = True\n"
        "            except Exception:\n                pass\n"
        "print('ESCAPED', len(open({secret!r}).read()))",
        modes=_STRONG,
    ),
    EscapeAttempt(
        "fill_disk",
        'for i in range(1000):\n    with open(f"f{{i}}", "wb") as f:\n        f.write(b"x" * (1 << 20))\n'
        'print("ESCAPED")',
        modes=_STRONG,  # a tmpfs of disk_mb, or (landlock) the supervisor's measure
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
    known_gap: bool = False
    """The mode is known not to stop this attempt (:attr:`EscapeAttempt.gaps`): not counted as
    an escape of the mode's claims, reported apart."""

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


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmdt.argtypes = [ctypes.c_void_p]
    return libc


_IOPRIO_GET, _IOPRIO_SET = (252, 251) if os.uname().machine == "x86_64" else (31, 30)
_IPC_RMID = 0


def harness_state(pid: int | None = None) -> dict[str, object]:
    """What a run must not change in the harness's process (its main thread): every resource
    limit, its nice value, CPU affinity, scheduling policy and I/O priority."""
    pid = os.getpid() if pid is None else pid
    state: dict[str, object] = {
        name: resource.prlimit(pid, getattr(resource, name))
        for name in dir(resource)
        if name.startswith("RLIMIT_") and not name.endswith("_INFINITY")
    }
    state["nice"] = os.getpriority(os.PRIO_PROCESS, pid)
    state["affinity"] = sorted(os.sched_getaffinity(pid))
    state["scheduler"] = os.sched_getscheduler(pid)
    state["ioprio"] = _libc().syscall(_IOPRIO_GET, 1, pid)
    return state


def _restore_harness(pid: int, want: dict[str, object], now: dict[str, object]) -> None:
    """Best effort: put back what a run changed (an unprivileged harness cannot undo everything)."""
    for name, value in want.items():
        if now.get(name) == value:
            continue
        with contextlib.suppress(OSError, ValueError):
            if name.startswith("RLIMIT_"):
                resource.prlimit(pid, getattr(resource, name), value)  # type: ignore[arg-type]
            elif name == "nice":
                os.setpriority(os.PRIO_PROCESS, pid, int(value))  # type: ignore[call-overload]
            elif name == "affinity":
                os.sched_setaffinity(pid, value)  # type: ignore[arg-type]
            elif name == "scheduler":
                os.sched_setscheduler(pid, int(value), os.sched_param(0))  # type: ignore[call-overload]
            elif name == "ioprio":
                _libc().syscall(_IOPRIO_SET, 1, pid, int(value))  # type: ignore[call-overload]


def _file_state(path: Path) -> tuple[int, int, int, tuple[tuple[str, bytes], ...]]:
    """An outside file's metadata a run must not change: mode, modification and change times
    (the change time moves on any chmod, chown, utime or xattr change), extended attributes."""
    st = os.stat(path)
    try:
        xattrs = tuple(sorted((name, os.getxattr(path, name)) for name in os.listxattr(path)))
    except OSError:
        xattrs = ()
    return st.st_mode, st.st_mtime_ns, st.st_ctime_ns, xattrs


def _host_ipc_keys() -> set[int]:
    """Keys of the System V shared memory segments, message queues and semaphore sets of this IPC
    namespace."""
    keys: set[int] = set()
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                next(f)
                keys |= {int(line.split()[0]) for line in f if line.strip()}
        except (OSError, StopIteration, ValueError):
            continue
    return keys


def _shmem_kb() -> int:
    """The host's shared memory (tmpfs, memory-backed files, System V segments), in KiB."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    return 0


class _ShmemWatch:
    """Samples the host's shared memory every 10 ms in a thread, for the memory judge."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="turngym-shmem-watch")

    def _loop(self) -> None:
        while not self._stop.wait(0.01):
            self.samples.append((time.monotonic(), _shmem_kb()))

    def __enter__(self) -> _ShmemWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def growth_kb(self, since: float, baseline: int) -> int:
        return max((kb for t, kb in self.samples if t >= since), default=baseline) - baseline


class _Targets:
    """What the attempts aim at: loopback listeners, a secret file, a folder outside, a unix
    datagram socket, a System V segment holding a secret, the harness itself."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="turngym-escape-targets-"))
        self.root.chmod(0o755)  # reachable by any user id: only the sandbox may stop a run
        self.secret = self.root / "secret.txt"
        self.secret.write_text("turngym-secret-token\n")
        self.secret.chmod(0o644)
        self.xattr_secret = "xattr-" + secrets.token_hex(8)
        with contextlib.suppress(OSError):  # where the file system has user attributes
            os.setxattr(self.secret, "user.turngym_secret", self.xattr_secret.encode())
        self.secret_state = _file_state(self.secret)
        self.outside = self.root / "outside"
        self.outside.mkdir()
        self.outside.chmod(0o777)
        self.tcp_hits: list[str] = []
        self.udp_hits: list[str] = []
        self.port = 0
        self.udp_port = 0
        self.pid = os.getpid()
        self.harness = harness_state(self.pid)
        self.spawner_pid = self.pid
        self.spawner: dict[str, object] = {}
        self.unix_path = str(self.root / "host.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.unix.bind(self.unix_path)
        self.unix.setblocking(False)
        os.chmod(self.unix_path, 0o777)
        self.unix_hits = 0
        rng = secrets.SystemRandom()
        self.shm_key, self.leave_key = rng.randrange(1 << 24, 1 << 30), rng.randrange(1 << 24, 1 << 30)
        self.shm_secret = "shm-" + secrets.token_hex(8)
        self.shm_id = self._make_shm()

    def _make_shm(self) -> int:
        libc = _libc()
        shm = libc.shmget(self.shm_key, 4096, 0o1644)  # IPC_CREAT | rw-r--r--
        if shm < 0:
            return -1
        addr = libc.shmat(shm, None, 0)
        if addr not in (None, ctypes.c_void_p(-1).value):
            ctypes.memmove(addr, self.shm_secret.encode() + b"\0", len(self.shm_secret) + 1)
            libc.shmdt(addr)
        return shm

    def fields(self) -> dict[str, object]:
        return {
            "port": self.port,
            "udp_port": self.udp_port,
            "secret": str(self.secret),
            "outside": str(self.outside),
            "repo_file": str(Path(__file__).resolve()),
            "pid": self.pid,
            "spawner_pid": self.spawner_pid,
            "unix_path": self.unix_path,
            "shm_key": self.shm_key,
            "leave_key": self.leave_key,
        }

    def unix_received(self) -> int:
        while True:
            try:
                self.unix.recv(65536)
            except OSError:
                return self.unix_hits
            self.unix_hits += 1

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
        self.unix.close()
        libc = _libc()
        if self.shm_id >= 0:
            libc.shmctl(self.shm_id, _IPC_RMID, None)
        if (left := libc.shmget(self.leave_key, 0, 0)) >= 0:
            libc.shmctl(left, _IPC_RMID, None)
        if (left := libc.msgget(self.leave_key, 0)) >= 0:
            libc.msgctl(left, _IPC_RMID, None)
        if (left := libc.semget(self.leave_key, 0, 0)) >= 0:
            libc.semctl(left, 0, _IPC_RMID)
        shutil.rmtree(self.root, ignore_errors=True)


async def run_escape_attempts(
    sandbox: Sandbox,
    attempts: Sequence[EscapeAttempt] = ESCAPE_ATTEMPTS,
    *,
    concurrency: int = 2,
) -> list[EscapeOutcome]:
    """Run ``attempts`` (those the sandbox's isolation claims to stop, and those it is known not
    to: :attr:`EscapeOutcome.known_gap`) against ``sandbox``, ``concurrency`` at a time, and
    judge each (see the module docstring)."""
    mode = await sandbox.isolation()
    chosen = [a for a in attempts if mode in a.modes or mode in a.gaps]
    targets = _Targets()
    targets.spawner_pid = await anyio.to_thread.run_sync(sandbox_module._spawner.started_pid)
    targets.spawner = harness_state(targets.spawner_pid)
    outcomes: list[EscapeOutcome | None] = [None] * len(chosen)
    limiter = anyio.Semaphore(concurrency)
    try:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        udp = await anyio.create_udp_socket(family=socket.AF_INET, local_host="127.0.0.1")
        async with listener, udp:  # closed however the attempts end (no socket left to the GC)
            targets.port = int(listener.extra(SocketAttribute.local_port))
            targets.udp_port = int(udp.extra(SocketAttribute.local_port))
            with _ShmemWatch() as watch:
                async with anyio.create_task_group() as servers:
                    servers.start_soon(targets.serve_tcp, listener)
                    servers.start_soon(targets.serve_udp, udp)

                    async def one(i: int, attempt: EscapeAttempt) -> None:
                        async with limiter:
                            outcomes[i] = await _attempt(sandbox, attempt, targets, watch, mode)

                    async with anyio.create_task_group() as tg:
                        for i, attempt in enumerate(chosen):
                            tg.start_soon(one, i, attempt)
                    servers.cancel_scope.cancel()
    finally:
        targets.close()
    return [o for o in outcomes if o is not None]


async def _attempt(
    sandbox: Sandbox, attempt: EscapeAttempt, targets: _Targets, watch: _ShmemWatch, mode: Isolation
) -> EscapeOutcome:
    tcp_before, udp_before = len(targets.tcp_hits), len(targets.udp_hits)
    unix_before = targets.unix_received()
    code = attempt.code.format(**targets.fields())
    started, shmem_before = time.monotonic(), _shmem_kb()
    evidence: list[str] = []
    try:
        result = await sandbox.run(code)
    except Exception as e:  # the run must end as a result, whatever the code did
        evidence.append(f"Sandbox.run raised {type(e).__name__}: {e}")
        result = RunResult(RunStatus.SANDBOX_ERROR, "", f"raised {e!r}")
    await anyio.sleep(0.05)  # a datagram or connection in flight lands
    limits = sandbox.config.limits
    output_tokens = set(result.output.split())
    if any(line.startswith(MARKER) for line in result.output.splitlines()):
        evidence.append(f"printed {MARKER}")
    if attempt.name.startswith(("tcp", "ctypes_tcp")) and len(targets.tcp_hits) > tcp_before:
        evidence.append("the loopback listener accepted a connection")
    if attempt.name.startswith("udp") and len(targets.udp_hits) > udp_before:
        evidence.append("the loopback socket received a datagram")
    if targets.unix_received() > unix_before:
        evidence.append("the host's unix socket received a datagram")
    if (targets.outside / "pwned").exists():
        evidence.append("a file appeared outside the sandbox")
        (targets.outside / "pwned").unlink()
    secret_now = _file_state(targets.secret)
    if secret_now != targets.secret_state:
        evidence.append(
            f"the outside file's mode/times/xattrs changed: {secret_now} (was {targets.secret_state})"
        )
        with contextlib.suppress(OSError):
            os.chmod(targets.secret, targets.secret_state[0] & 0o7777)
            os.utime(targets.secret, ns=(targets.secret_state[1], targets.secret_state[1]))
            for name, _value in set(secret_now[3]) - set(targets.secret_state[3]):
                os.removexattr(targets.secret, name)
            for name, value in targets.secret_state[3]:
                os.setxattr(targets.secret, name, value)
        targets.secret_state = _file_state(targets.secret)  # its change time moved with the repair
    if str(os.stat(targets.secret).st_ino) in output_tokens and "inode" in output_tokens:
        evidence.append("the outside file's inode number was read")
    if targets.xattr_secret in result.output:
        evidence.append("the outside file's extended attribute was read")
    if "pids" in output_tokens and str(targets.pid) in output_tokens:
        evidence.append(f"the harness's pid {targets.pid} was found")
    if targets.shm_secret in result.output:
        evidence.append("the harness's System V shared memory was read")
    if targets.leave_key in _host_ipc_keys():
        evidence.append("a System V segment, message queue or semaphore set was left on the host")
    harness = await anyio.to_thread.run_sync(harness_state, targets.pid)
    changed = {k: (v, targets.harness[k]) for k, v in harness.items() if targets.harness.get(k) != v}
    if changed:
        evidence.append(f"the harness's limits or scheduling changed: {changed}")
        _restore_harness(targets.pid, targets.harness, harness)
    if targets.spawner_pid != targets.pid:
        spawner = await anyio.to_thread.run_sync(harness_state, targets.spawner_pid)
        changed = {k: (v, targets.spawner[k]) for k, v in spawner.items() if targets.spawner.get(k) != v}
        if changed:
            evidence.append(f"the spawner's limits or scheduling changed: {changed}")
            _restore_harness(targets.spawner_pid, targets.spawner, spawner)
    bound_kb = (limits.max_processes * limits.memory_mb + limits.disk_mb) * 1024
    grown = watch.growth_kb(started, shmem_before)
    if grown > bound_kb:
        evidence.append(
            f"host shared memory grew {grown // 1024} MB during the run (bound {bound_kb // 1024} MB)"
        )
    if attempt.status is not None and result.status is not attempt.status:
        evidence.append(f"status {result.status} ({result.detail}), not {attempt.status}: the code chose it")
    if result.status in attempt.forbidden:
        evidence.append(f"status {result.status} ({result.detail}): the code chose it")
    if result.status is RunStatus.SANDBOX_ERROR:
        evidence.append(f"the run ended as a sandbox error: {result.detail}")
    if "clean-up:" in result.detail:
        evidence.append(result.detail)
    if len(result.output.encode()) > limits.output_bytes:
        evidence.append(f"{len(result.output.encode())} bytes of output kept (cap {limits.output_bytes})")
    if result.seconds > sandbox_module._wall_cap_s(limits) + 5.0:  # waits for a CPU do not count
        evidence.append(f"ran {result.seconds:.1f}s (limit {limits.timeout_s:g}s)")
    deadline = time.monotonic() + 2.0
    left = await anyio.to_thread.run_sync(leftover_processes, result)
    while left and time.monotonic() < deadline:  # a killed process may take a moment to go
        await anyio.sleep(0.05)
        left = await anyio.to_thread.run_sync(leftover_processes, result)
    if left:
        evidence.append(f"processes outlived the run: {left[:5]}")
    if result.workdir and os.path.lexists(result.workdir):
        evidence.append(f"working folder left behind: {result.workdir}")
    stopped = result.status is not RunStatus.OK or not attempt.must_fail
    gap = mode in attempt.gaps and mode not in attempt.modes
    return EscapeOutcome(attempt.name, result, bool(evidence), stopped, evidence, known_gap=gap)
