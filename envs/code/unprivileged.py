"""Run a Python snippet as a user without root, from a process that has root (tests and benches).

Continuous integration runs as root, while most users of the code sandbox do not: the modes a
user without root gets (``userns``, ``landlock``) are tested by dropping to an unprivileged user
id in a child process. :func:`run_as_user` starts ``python -c <boot>``; the boot code, still
root, creates a scratch folder owned by that user (its ``HOME`` and ``TMPDIR``), makes the
interpreter reachable for it when an ancestor folder is closed to others (some images keep
Python under ``/root``, mode 700: a private mount namespace then covers that folder with an open
one holding the interpreter's tree, changing nothing on the host), drops every group and user
id for good, and runs the snippet. The snippet's stdout, stderr and exit status come back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

__all__ = ["NOBODY", "run_as_user"]

NOBODY = 65534
"""The conventional unprivileged user id (``nobody``)."""

_BOOT = r"""
import ctypes, os, stat, sys, tempfile
uid, gid, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
def check(ret, what):
    if ret != 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")
closed = []
for path in {os.path.realpath(sys.executable), os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), root}:
    parts = path.split("/")
    for i in range(2, len(parts)):
        folder = "/".join(parts[:i])
        if not os.stat(folder).st_mode & stat.S_IXOTH and (folder, parts[i]) not in closed:
            closed.append((folder, parts[i]))
if closed:
    check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    check(libc.mount(None, b"/", None, (1 << 14) | (1 << 18), None), "make mounts private")
    for folder, child in closed:
        keep = tempfile.mkdtemp(prefix="turngym-as-user-")
        check(libc.mount(f"{folder}/{child}".encode(), keep.encode(), None, 4096 | 16384, None), "bind")
        check(libc.mount(b"tmpfs", folder.encode(), b"tmpfs", 0, b"mode=755,size=1m"), "cover")
        os.mkdir(f"{folder}/{child}")
        check(libc.mount(keep.encode(), f"{folder}/{child}".encode(), None, 4096 | 16384, None), "bind back")
        check(libc.umount2(keep.encode(), 2), "unmount the stash")  # MNT_DETACH
        os.rmdir(keep)
home = tempfile.mkdtemp(prefix="turngym-as-user-")
os.chown(home, uid, gid)
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
assert os.geteuid() == uid and os.getuid() == uid
libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE, as for a process a user started (setuid cleared it)
os.environ.update(HOME=home, TMPDIR=home)
tempfile.tempdir = None
os.chdir(root)
sys.path.insert(0, root)
try:
    exec(compile(sys.argv[4], "<as-user>", "exec"), {"__name__": "__main__"})
finally:
    sys.stdout.flush()
    import shutil
    shutil.rmtree(home, ignore_errors=True)
"""


def run_as_user(
    code: str, *, uid: int = NOBODY, gid: int | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (dedented) as ``uid`` in a fresh interpreter with this repository importable.

    Needs root (raises ``PermissionError`` otherwise). The scratch folder is removed at the end.
    """
    if os.geteuid() != 0:
        raise PermissionError("run_as_user needs root (it drops to an unprivileged user id)")
    root = str(Path(__file__).resolve().parents[2])
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "HF_HUB_OFFLINE")}
    env["PYTHONPATH"] = root
    argv = [sys.executable, "-c", _BOOT, str(uid), str(uid if gid is None else gid), root]
    argv.append(textwrap.dedent(code))
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
