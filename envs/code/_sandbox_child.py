"""The sandbox's own process: sets up the isolation, then runs the untrusted code.

Run only by :class:`envs.code.sandbox.Sandbox` as ``python -I -S -B -u -X utf8 _sandbox_child.py
<config-json>`` with the code on stdin, the merged stdout/stderr on a pipe and a status pipe as
fd 3. It imports only the standard library (never the project): it must start fast and trust
nothing outside it.

Two processes, so that something unsandboxed always watches the sandboxed one:

- the *supervisor* (this script's first process) reads the code, enters new namespaces (modes
  ``namespaces``, and ``userns`` with a user namespace first), forks the *runner* and waits for it,
  killing it at its time limit (``timeout_s``, not counting its waits for a CPU; ``wall_cap_s``
  of wall-clock time at most), then reports the runner's exit status or
  signal, CPU time and peak memory as one JSON line on fd 3;
- the *runner* (in a process group of its own in ``userns`` mode) builds the jail (see :func:`_jail`),
  drops every privilege, applies rlimits, ``PR_SET_NO_NEW_PRIVS``, the seccomp filter (:func:`_seccomp`) and
  (mode ``landlock``) a Landlock ruleset, writes ``ready`` on fd 3 and closes it, installs the
  audit hook, and executes the code in ``__main__``. Nothing the code does after that reaches
  fd 3: its exit status is only reported, never read as a verdict.

Modes (chosen by the parent, see ``Isolation``):

- ``namespaces`` (needs root or CAP_SYS_ADMIN): new mount, PID, network, IPC and UTS namespaces.
  The runner is PID 1 of its PID namespace (when it ends, the kernel kills every process in it);
  the network namespace has only a loopback interface that is down; the root is a fresh tmpfs
  holding read-only bind mounts of the system and Python directories, a few device nodes and a
  size-limited tmpfs ``/sandbox`` (the working directory, ``/tmp`` points there); the old root
  is detached. The runner then switches to an unprivileged user id of its own (``uid``), so
  ``RLIMIT_NPROC`` bounds its processes and it can signal nothing outside.
- ``userns`` (no privilege): the supervisor first enters a new user namespace mapping only the
  caller's ids (as :data:`INSIDE_UID`), then the same namespaces and jail; binds are recursive
  and keep the flags the host locked; the runner drops every capability.
- ``landlock`` (any user, Linux >= 5.13): same user id with every capability dropped; a Landlock
  ruleset allows reading the system and Python directories and everything in the working folder
  only (TCP bind/connect denied too from Landlock ABI 4; signals and abstract sockets scoped from
  ABI 6); seccomp refuses new processes and sockets, and confines process-control calls to the
  runner itself (see below).
- ``rlimits``: resource limits, dropped capabilities and the audit hook only: NOT a security
  boundary (used only when asked for by name).

The seccomp filter (x86-64 and aarch64) refuses with ``EPERM``, in every mode: sockets other than
``AF_UNIX``, io_uring, ptrace and cross-process memory access, pidfds, ``kcmp``, bpf, perf events,
userfaultfd, keyrings, namespace and mount calls, module loading, kexec, handle opening,
memory-backed files, System V IPC, growing a pipe's buffer (``F_SETPIPE_SZ``) and new sessions
(``setsid``: a session is an autogroup of its own, outside the one every run shares, see
``_sandbox_spawner.py``; ``RLIMIT_NICE`` 0 keeps its nice value from being lowered); it kills the
process (``SIGSYS``) on the tripwire call :data:`TRIPWIRE_NR`. In ``landlock`` mode also: new
processes (fork, vfork, clone without ``CLONE_THREAD``), ``setpgid`` / ``tkill``;
signals and ``prlimit64``, ``sched_*``, ``setpriority``, ``ioprio_*``, ``getpgid``, ``getsid``
unless aimed at the runner itself (and no ``SIGSYS``); an fd's owner (``F_SETOWN``,
``F_SETOWN_EX``, ``F_SETSIG``, ``FIOSETOWN``, ``SIOCSPGRP``: I/O signals to another process);
metadata changes (``chmod``, ``chown``, ``utime`` and ``xattr`` families); every socket call but a
unix ``socketpair`` and ``sendto`` without an address. In the namespace modes: ``SIGSYS`` sent by
any call (only the filter's own kill reads as a sandbox stop).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import struct
import sys

EXIT_SETUP = 125
"""Runner exit status when the jail could not be built (the parent reads the ``setup_error``
report on the status pipe, never this number: the code's own exit status means nothing but itself)."""
TRIPWIRE_NR = 1023
"""A system call number no kernel uses: the seccomp filter kills the process on it
(``SIGSYS``), so the audit hook ends a run in a way its supervisor observes from outside."""
INSIDE_UID = 1000
"""The user and group id the code has inside its user namespace (``userns`` mode)."""

STATUS_FD = 3
"""The status pipe's descriptor (the parent names it in the config's ``status_fd``)."""
WORKDIR_IN_JAIL = "/sandbox"

# --- constants (linux/sched.h, linux/mount.h, linux/prctl.h, linux/seccomp.h, linux/landlock.h) --
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000
CLONE_NAMESPACES = 0x7E020000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = (
    1024,
    2048,
    4096,
    16384,
    1 << 18,
    1 << 21,
)
ST_FLAGS = ((1, MS_RDONLY), (2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME))
ST_FLAGS += ((2048, MS_NODIRATIME), (4096, MS_RELATIME))
MNT_DETACH = 2
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 1, 2, 4
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECBITS_LOCKED_NOROOT = 0x3F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS and their locks
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM, ENOSYS, EOPNOTSUPP = 1, 38, 95
F_SETPIPE_SZ, F_SETOWN, F_SETSIG, F_SETOWN_EX = 1031, 8, 10, 15
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
AF_UNIX = 1
PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1

# syscall numbers: (x86_64, aarch64); aarch64 from asm-generic/unistd.h; -1: none there
_ARCH = {"x86_64": 0, "aarch64": 1}
_AUDIT_ARCH = (0xC000003E, 0xC00000B7)
_NR: dict[str, tuple[int, int]] = {
    "socket": (41, 198),
    "socketpair": (53, 199),
    "connect": (42, 203),
    "bind": (49, 200),
    "listen": (50, 201),
    "accept": (43, 202),
    "accept4": (288, 242),
    "sendto": (44, 206),
    "sendmsg": (46, 211),
    "sendmmsg": (307, 269),
    "clone": (56, 220),
    "clone3": (435, 435),
    "fork": (57, -1),
    "vfork": (58, -1),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "process_mrelease": (448, 448),
    "kcmp": (312, 272),
    "move_pages": (279, 239),
    "migrate_pages": (256, 238),
    "get_robust_list": (274, 100),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "unshare": (272, 97),
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "memfd_create": (319, 279),
    "memfd_secret": (447, 447),
    "shmget": (29, 194),
    "shmat": (30, 196),
    "shmctl": (31, 195),
    "shmdt": (67, 197),
    "semget": (64, 190),
    "semop": (65, 193),
    "semctl": (66, 191),
    "semtimedop": (220, 192),
    "msgget": (68, 186),
    "msgsnd": (69, 189),
    "msgrcv": (70, 188),
    "msgctl": (71, 187),
    "mq_open": (240, 180),
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
    "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424),
    "pidfd_getfd": (438, 438),
    "setsid": (112, 157),
    "setpgid": (109, 154),
    "getpgid": (121, 155),
    "getsid": (124, 156),
    "prlimit64": (302, 261),
    "setpriority": (141, 140),
    "getpriority": (140, 141),
    "sched_setparam": (142, 118),
    "sched_getparam": (143, 121),
    "sched_setscheduler": (144, 119),
    "sched_getscheduler": (145, 120),
    "sched_rr_get_interval": (148, 127),
    "sched_setaffinity": (203, 122),
    "sched_getaffinity": (204, 123),
    "sched_setattr": (314, 274),
    "sched_getattr": (315, 275),
    "ioprio_set": (251, 30),
    "ioprio_get": (252, 31),
    "chmod": (90, -1),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "chown": (92, -1),
    "fchown": (93, 55),
    "lchown": (94, -1),
    "fchownat": (260, 54),
    "utime": (132, -1),
    "utimes": (235, -1),
    "futimesat": (261, -1),
    "utimensat": (280, 88),
    "setxattr": (188, 5),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "removexattr": (197, 14),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
    "setxattrat": (463, 463),
    "removexattrat": (466, 466),
    "getxattr": (191, 8),
    "lgetxattr": (192, 9),
    "listxattr": (194, 11),
    "llistxattr": (195, 12),
    "getxattrat": (464, 464),
    "listxattrat": (465, 465),
    "fcntl": (72, 25),
    "ioctl": (16, 29),
    "mkdir": (83, -1),
    "mkdirat": (258, 34),
    "inotify_add_watch": (254, 27),
    "fanotify_init": (300, 262),
    "fanotify_mark": (301, 263),
}
_DENY_ALWAYS = [
    "setsid",  # a new session is a new autogroup, apart from the one all runs share
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "process_mrelease",
    "kcmp",
    "move_pages",
    "migrate_pages",
    "get_robust_list",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    "memfd_create",
    "memfd_secret",
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "semget",
    "semop",
    "semctl",
    "semtimedop",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
]
_DENY_SINGLE_PROCESS = ["fork", "vfork", "setpgid", "tkill"]
"""``landlock`` mode: no new process, no new process group (nor session: every mode), no signal
by thread id."""
_DENY_METADATA = [
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    "inotify_add_watch",
    "fanotify_init",
    "fanotify_mark",
]
"""``landlock`` mode: metadata changes, and watching files (Landlock has no right for them and
seccomp cannot see paths: refused everywhere, the working folder included)."""
_NO_XATTR_READ = ["getxattr", "lgetxattr", "listxattr", "llistxattr", "getxattrat", "listxattrat"]
"""``landlock`` mode: extended attributes read by path answer ``EOPNOTSUPP`` (as on a file system
without them, which ``shutil.copy2`` accepts)."""
_DENY_SOCKET_CALLS = ["socket", "connect", "bind", "listen", "accept", "accept4", "sendmsg", "sendmmsg"]
"""``landlock`` mode: no socket but an ``AF_UNIX`` pair, which cannot be pointed anywhere else."""
_PID_ARG0 = [
    "prlimit64",
    "getpgid",
    "getsid",
    "sched_setparam",
    "sched_getparam",
    "sched_setscheduler",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_setaffinity",
    "sched_getaffinity",
    "sched_setattr",
    "sched_getattr",
]
"""``landlock`` mode: calls whose first argument is a process id: 0 or the runner's own only."""

# Landlock (linux/landlock.h)
LL_CREATE_RULESET, LL_ADD_RULE, LL_RESTRICT_SELF = 444, 445, 446
LL_CREATE_RULESET_VERSION = 1
LL_RULE_PATH_BENEATH = 1
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_TRUNCATE, LL_IOCTL_DEV = 1 << 14, 1 << 15
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1, 2
LL_SCOPE_ABSTRACT_UNIX, LL_SCOPE_SIGNAL = 1, 2


class SetupError(Exception):
    """The jail could not be built."""


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return ctypes, libc


def _check(ret: int, what: str) -> int:
    if ret < 0:
        import ctypes

        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} (errno {err})")
    return ret


# --- the supervisor ------------------------------------------------------------------------------
def main() -> None:
    global STATUS_FD
    cfg = json.loads(sys.argv[1])
    STATUS_FD = int(cfg.get("status_fd", STATUS_FD))
    code = sys.stdin.buffer.read()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.umask(0o022)
    mode = cfg["mode"]
    try:
        if cfg.get("cgroup"):  # the run's memory cgroup: this process and every one it starts
            with contextlib.suppress(OSError):  # not joined: the limits hold as without one
                with open(os.path.join(cfg["cgroup"], "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("-1000")  # at the bound the kernel kills a process of the code, not this one
        if mode == "namespaces":
            _, libc = _libc()
            flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
            _check(libc.unshare(flags), "unshare")
        elif mode == "userns":
            _enter_user_namespace()
    except (SetupError, OSError) as e:
        _status({"setup_error": f"{type(e).__name__}: {e}"})
        os._exit(0)
    alive_r, alive_w = os.pipe()
    # /proc as this process sees it now: the runner's pivot_root moves this process's root too
    # (same mount namespace), and the runner's schedstat must stay readable
    try:
        proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        proc = -1
    pid = os.fork()
    if pid == 0:
        if proc >= 0:
            os.close(proc)  # the host's /proc is not the code's
        os.close(alive_w)
        _runner(cfg, code, alive_r)  # never returns
    os.close(alive_r)
    schedstat = -1
    if proc >= 0:
        with contextlib.suppress(OSError):
            schedstat = os.open(f"{pid}/schedstat", os.O_RDONLY | os.O_CLOEXEC, dir_fd=proc)
        os.close(proc)
    quota = None
    if mode == "landlock":  # the namespace modes' folder is a tmpfs of this size
        quota = (cfg["workdir"], int(cfg["disk_mb"]) << 20, int(cfg["inodes"]))
    report = _supervise(pid, float(cfg["timeout_s"]), float(cfg["wall_cap_s"]), quota, schedstat)
    _status(report)
    os._exit(0)


def _enter_user_namespace() -> None:
    """New user, mount, PID, network, IPC and UTS namespaces for a user without root: this user's
    id (and group) appear as :data:`INSIDE_UID` inside; nothing else is mapped."""
    _, libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    _check(libc.unshare(flags), "unshare")
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{INSIDE_UID} {uid} 1"),
        ("gid_map", f"{INSIDE_UID} {gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _status(obj: dict) -> None:
    with contextlib.suppress(OSError):
        os.write(STATUS_FD, (json.dumps(obj) + "\n").encode())


def _supervise(
    pid: int,
    limit_s: float,
    wall_cap_s: float,
    quota: tuple[str, int, int] | None = None,
    schedstat: int = -1,
) -> dict:
    """Wait for the runner, killing it once it has been going ``limit_s`` not counting its waits
    for a CPU (:func:`_run_delay_s` of its ``/proc/<pid>/schedstat``, open as ``schedstat``; -1:
    the wall clock alone), or after ``wall_cap_s`` of wall-clock time in any case, or
    when its folder holds more than ``quota`` = (folder, bytes, entries), checked every
    :data:`QUOTA_POLL_S`; its exit status and usage.

    Why not the wall clock alone: runs are scheduled below the trainer (and share one autogroup,
    see ``_sandbox_spawner.py``), so on a busy machine a run may wait for a CPU much longer than it
    runs; cutting it at ``limit_s`` of wall-clock time would turn the machine's load into
    timeouts, that is into rewards."""
    import select
    import time

    timed_out = over_quota = False
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd >= 0:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        start, waited0 = time.monotonic(), _run_delay_s(schedstat)
        while True:
            elapsed = time.monotonic() - start
            going = elapsed - max(0.0, _run_delay_s(schedstat) - waited0)
            # going grows no faster than the wall clock: sleeping what is left never overshoots
            left = min(limit_s - going, wall_cap_s - elapsed)
            if left <= 0:
                timed_out = True
                break
            if poller.poll(max(1, int(1000 * (min(left, QUOTA_POLL_S) if quota else left)))):
                break
            if quota and _folder_over(*quota):
                over_quota = True
                break
        if timed_out or over_quota:
            os.kill(pid, signal.SIGKILL)
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    report: dict = {
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
        "maxrss_kb": usage.ru_maxrss,
        "timeout": timed_out,
        "disk": over_quota,
    }
    if os.WIFSIGNALED(status):
        report["signal"] = os.WTERMSIG(status)
    else:
        report["exit"] = os.WEXITSTATUS(status)
    return report


QUOTA_POLL_S = 0.1
"""How often the supervisor measures the working folder in ``landlock`` mode (no tmpfs there)."""


def _run_delay_s(schedstat: int) -> float:
    """How long a process (its main thread) has waited for a CPU while runnable, in seconds, from
    its open ``/proc/<pid>/schedstat``; 0.0 where there is none or the kernel does not say."""
    if schedstat < 0:
        return 0.0
    try:
        return int(os.pread(schedstat, 128, 0).split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def _folder_over(folder: str, max_bytes: int, max_entries: int) -> bool:
    """Whether ``folder`` holds more than ``max_bytes`` (allocated) or ``max_entries`` entries.
    Links are not followed; every folder is listable (the filter makes ``mkdir`` keep ``u+rwx``
    and refuses ``chmod``), and one that is not counts as over."""
    used = entries = 0
    stack = [folder]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    entries += 1
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    used += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    if used > max_bytes or entries > max_entries:
                        return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False


# --- the runner ----------------------------------------------------------------------------------
def _runner(cfg: dict, code: bytes, alive_r: int) -> None:
    try:
        if cfg.get("cgroup"):
            with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
                f.write("0")  # the supervisor's -1000 is not the code's
        workdir, tripwire = _confine(cfg, alive_r)
    except BaseException as e:
        _status({"setup_error": f"{type(e).__name__}: {e}"})
        os._exit(EXIT_SETUP)
    _status({"ready": True})  # the last word the supervisor takes from this process
    os.close(STATUS_FD)
    _run_code(code, workdir, cfg, tripwire)


def _confine(cfg: dict, alive_r: int) -> tuple[str, object]:
    mode = cfg["mode"]
    workdir = cfg["workdir"]
    uid, gid = cfg.get("uid"), cfg.get("gid")
    if mode == "userns":
        # a process group of its own: kill(0) and killpg reach no process outside the run (the
        # supervisor has the same user id; in the other modes a different user id or the seccomp
        # filter keeps its signals in). Not a session: that would be an autogroup of its own,
        # apart from the one all runs share (see _sandbox_spawner.join_autogroup_nice)
        os.setpgid(0, 0)
    if mode in ("namespaces", "userns"):
        _jail(cfg, userns=mode == "userns")
        workdir = WORKDIR_IN_JAIL
    _rlimits(cfg, mode)
    os.chdir(workdir)
    if mode == "namespaces":
        if uid is None or gid is None:
            raise SetupError("namespaces mode needs an unprivileged uid and gid")
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if os.getuid() != uid or os.geteuid() != uid:
            raise SetupError("could not switch to the sandbox user")
    else:
        _drop_capabilities()
    ctypes, libc = _libc()
    # the parent-death signal is reset by credential changes: set it after the last one, then
    # make sure the supervisor did not die before it was set
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "PR_SET_PDEATHSIG")
    import select

    poller = select.poll()
    poller.register(alive_r, select.POLLIN)
    if poller.poll(0):
        os._exit(EXIT_SETUP)  # the supervisor is gone (its end of the pipe closed)
    os.close(alive_r)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    if mode == "landlock":
        _landlock(cfg["read_paths"], workdir)
    if cfg.get("seccomp", True):
        _seccomp(mode)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    os.environ.clear()
    os.environ.update(env)
    tripwire = libc.syscall
    tripwire.argtypes = [ctypes.c_long]
    return workdir, tripwire


def _mount_flags(path: str) -> int:
    """The flags of the mount holding ``path`` that a bind of it must keep (in a user namespace
    the kernel refuses a remount that would clear a locked one)."""
    try:
        f_flag = os.statvfs(path).f_flag
    except OSError:
        return 0
    return sum(ms for st, ms in ST_FLAGS if f_flag & st)


def _jail(cfg: dict, *, userns: bool) -> None:
    """Mount namespace: a fresh tmpfs root with read-only binds, pivoted into."""
    ctypes, libc = _libc()
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

    def mount(
        source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
    ) -> None:
        enc = lambda s: None if s is None else s.encode()  # noqa: E731
        _check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")

    def read_only_below(target: str) -> None:
        # submounts of a recursive bind: read-only, no set-user-id, no devices (Linux >= 5.12)
        attr = struct.pack("=QQQQ", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
        buf = ctypes.create_string_buffer(attr, len(attr))
        nr = _NR["mount_setattr"][_ARCH.get(os.uname().machine, 0)]
        libc.syscall(nr, -100, target.encode(), AT_RECURSIVE, buf, len(attr))

    root = cfg["workdir"]
    uid, gid = (INSIDE_UID, INSIDE_UID) if userns else (cfg["uid"], cfg["gid"])
    bind = MS_BIND | (MS_REC if userns else 0)  # a user namespace may not bind a part of a locked tree
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=512,mode=755")
    for path in cfg["read_paths"]:
        if not os.path.lexists(path):
            continue
        target = root + path
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(path):
            if not os.path.lexists(target):
                os.symlink(os.readlink(path), target)
            continue
        if os.path.isdir(path):
            os.makedirs(target, exist_ok=True)
        else:
            open(target, "a").close()
        mount(path, target, None, bind)
        keep = _mount_flags(path)
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | keep)
        if userns:
            read_only_below(target)
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in ("null", "zero", "full", "random", "urandom"):
        target = f"{root}/dev/{dev}"
        open(target, "a").close()
        mount(f"/dev/{dev}", target, None, MS_BIND)
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_NOSUID | _mount_flags(f"/dev/{dev}"))
    sandbox = root + WORKDIR_IN_JAIL
    os.mkdir(sandbox)
    options = f"size={int(cfg['disk_mb'])}m,nr_inodes={int(cfg['inodes'])},mode=700,uid={uid},gid={gid}"
    mount("tmpfs", sandbox, "tmpfs", MS_NOSUID | MS_NODEV, options)
    os.symlink(WORKDIR_IN_JAIL, root + "/tmp")
    os.chdir(root)
    os.mkdir(".old")
    nr_pivot = 155 if os.uname().machine == "x86_64" else 41
    _check(libc.syscall(nr_pivot, b".", b".old"), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old", MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    libc.sethostname(b"sandbox", 7)


def _rlimits(cfg: dict, mode: str) -> None:
    def cap(kind: int, value: int) -> None:
        _, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))

    mib = 1024 * 1024
    cpu = max(1, int(cfg["cpu_s"] + 0.999))
    _, hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(
        resource.RLIMIT_CPU, (cpu, cpu + 1 if hard_cpu == resource.RLIM_INFINITY else hard_cpu)
    )
    cap(resource.RLIMIT_AS, int(cfg["memory_mb"]) * mib)
    cap(resource.RLIMIT_FSIZE, int(cfg["file_mb"]) * mib)
    cap(resource.RLIMIT_NOFILE, 64)
    cap(resource.RLIMIT_CORE, 0)
    cap(resource.RLIMIT_MEMLOCK, 0)
    cap(resource.RLIMIT_MSGQUEUE, 0)
    cap(resource.RLIMIT_NICE, 0)  # its nice cannot be lowered (the spawner set it already)
    if mode == "namespaces" or (mode == "rlimits" and os.getuid() != 0):
        # counts every task of the (real) user: in namespaces mode that user is the sandbox's own;
        # in landlock mode seccomp refuses new processes instead
        cap(resource.RLIMIT_NPROC, int(cfg["max_processes"]))
    elif mode == "userns":
        # counted per user namespace: the run's tasks and its supervisor (also in it)
        cap(resource.RLIMIT_NPROC, int(cfg["max_processes"]) + 1)


def _drop_capabilities() -> None:
    """Keep the user id but give up every capability, for good (no-op without capabilities)."""
    ctypes, libc = _libc()
    if os.getuid() == 0 or os.geteuid() == 0:
        libc.prctl(PR_SET_SECUREBITS, SECBITS_LOCKED_NOROOT, 0, 0, 0)
    for capability in range(64):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) < 0:
            break  # EINVAL past the last capability (EPERM without CAP_SETPCAP: none to drop)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capset(header, data), "capset")
    _check(libc.capget(header, data), "capget")
    if any(data):
        raise SetupError("capabilities remain after dropping them")


def _landlock(read_paths: list[str], workdir: str) -> None:
    ctypes, libc = _libc()
    abi = libc.syscall(LL_CREATE_RULESET, None, 0, LL_CREATE_RULESET_VERSION)
    if abi < 1:
        raise SetupError(f"Landlock unavailable: {os.strerror(ctypes.get_errno())}")
    fs_all = (1 << 13) - 1
    file_rights = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE
    if abi >= 2:
        fs_all |= 1 << 13  # REFER
    if abi >= 3:
        fs_all |= LL_TRUNCATE
        file_rights |= LL_TRUNCATE
    if abi >= 5:
        fs_all |= LL_IOCTL_DEV
        file_rights |= LL_IOCTL_DEV
    net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP if abi >= 4 else 0
    scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", fs_all, net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _check(libc.syscall(LL_CREATE_RULESET, buf, size, 0), "landlock_create_ruleset")
    read_dir = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
    rules = [(p, read_dir) for p in read_paths] + [(workdir, fs_all)]
    rules += [
        (f"/dev/{d}", LL_READ_FILE | LL_WRITE_FILE) for d in ("null", "zero", "full", "random", "urandom")
    ]
    for path, rights in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if not os.path.isdir(path):
                rights &= file_rights
            rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
            _check(libc.syscall(LL_ADD_RULE, ruleset, LL_RULE_PATH_BENEATH, rule, 0), f"landlock rule {path}")
        finally:
            os.close(fd)
    _check(libc.syscall(LL_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    os.close(ruleset)


class _Bpf:
    """A tiny classic-BPF assembler with labels (jump offsets are resolved at the end)."""

    LD_ABS, JEQ, JSET, JGE, JA, RET, AND = 0x20, 0x15, 0x45, 0x35, 0x05, 0x06, 0x54

    def __init__(self) -> None:
        self.insns: list[tuple[int, object, object, int]] = []
        self.labels: dict[str, int] = {}
        self._n = 0

    def new(self) -> str:
        self._n += 1
        return f"L{self._n}"

    def at(self, label: str) -> None:
        self.labels[label] = len(self.insns)

    def op(self, code: int, k: int = 0, jt: object = 0, jf: object = 0) -> None:
        self.insns.append((code, jt, jf, k & 0xFFFFFFFF))

    def ret(self, value: int) -> None:
        self.op(self.RET, value)

    def load_arg(self, i: int, high: bool = False) -> None:
        self.op(self.LD_ABS, 16 + 8 * i + (4 if high else 0))  # little-endian seccomp_data.args[i]

    def assemble(self) -> bytes:
        out = []
        for i, (code, jt, jf, k) in enumerate(self.insns):
            offsets = []
            for jump in (jt, jf):
                if isinstance(jump, str):
                    jump = self.labels[jump] - i - 1
                    if not 0 <= jump < 256:
                        raise SetupError("seccomp jump out of range")
                offsets.append(int(jump))  # type: ignore[call-overload]
            out.append(struct.pack("=HBBI", code, offsets[0], offsets[1], k))
        return b"".join(out)


def _seccomp(mode: str) -> None:
    """Install the filter of ``mode`` (see the module docstring); the runner's own pid is built in."""
    machine = os.uname().machine
    if machine not in _ARCH:
        raise SetupError(f"no seccomp filter for {machine}")
    arch = _ARCH[machine]
    single = mode == "landlock"
    me = os.getpid()
    deny_errno = SECCOMP_RET_ERRNO | EPERM

    def nr(name: str) -> int:
        return _NR[name][arch]

    bpf = _Bpf()
    bpf.op(_Bpf.LD_ABS, 4)  # arch
    bpf.op(_Bpf.JEQ, _AUDIT_ARCH[arch], 1, 0)
    bpf.ret(SECCOMP_RET_KILL_PROCESS)
    bpf.op(_Bpf.LD_ABS, 0)  # syscall number
    if machine == "x86_64":
        bpf.op(_Bpf.JGE, 0x40000000, 0, 1)  # the x32 ABI
        bpf.ret(deny_errno)

    def rule(name_or_nr: str | int, body) -> None:  # body runs with the syscall matched; must return
        number = name_or_nr if isinstance(name_or_nr, int) else nr(name_or_nr)
        if number < 0:
            return
        skip = bpf.new()
        bpf.op(_Bpf.JEQ, number, 0, skip)
        body()
        bpf.at(skip)

    def returns(value: int):
        return lambda: bpf.ret(value)

    def arg_in(i: int, values: tuple[int, ...], then: object, otherwise: object) -> None:
        bpf.load_arg(i)
        for v in values[:-1]:
            bpf.op(_Bpf.JEQ, v, then, 0)
        bpf.op(_Bpf.JEQ, values[-1], then, otherwise)

    def chain(*checks: tuple[int, tuple[int, ...], bool]) -> None:
        """Allow when every (argument, values, wanted) check holds (wanted: the argument is one of
        the values, else none of them); refuse with EPERM otherwise."""
        deny = bpf.new()
        for i, values, wanted in checks:
            ok = bpf.new()
            if wanted:
                arg_in(i, values, ok, deny)
            else:
                arg_in(i, values, deny, ok)
            bpf.at(ok)
        bpf.ret(SECCOMP_RET_ALLOW)
        bpf.at(deny)
        bpf.ret(deny_errno)

    def owner_rwx(i: int) -> None:
        deny = bpf.new()
        bpf.load_arg(i)
        bpf.op(_Bpf.AND, 0o700)
        bpf.op(_Bpf.JEQ, 0o700, 0, deny)
        bpf.ret(SECCOMP_RET_ALLOW)
        bpf.at(deny)
        bpf.ret(deny_errno)

    rule(TRIPWIRE_NR, returns(SECCOMP_RET_KILL_PROCESS))
    rule("clone3", returns(SECCOMP_RET_ERRNO | ENOSYS))  # glibc falls back to clone, checked below

    def clone() -> None:
        allow, deny = bpf.new(), bpf.new()
        bpf.load_arg(0)
        bpf.op(_Bpf.JSET, CLONE_NAMESPACES, deny, 0)
        bpf.op(_Bpf.JSET, CLONE_THREAD, allow, deny if single else allow)
        bpf.at(allow)
        bpf.ret(SECCOMP_RET_ALLOW)
        bpf.at(deny)
        bpf.ret(deny_errno)

    rule("clone", clone)
    # pipes keep their default size: their buffers are kernel memory outside the address space;
    # landlock mode: no I/O signals to another process (an fd's owner), whatever Landlock scopes
    fcntl_denied = (F_SETPIPE_SZ, F_SETOWN, F_SETSIG, F_SETOWN_EX) if single else (F_SETPIPE_SZ,)
    rule("fcntl", lambda: chain((1, fcntl_denied, False)))
    if single:
        rule("ioctl", lambda: chain((1, (FIOSETOWN, SIOCSPGRP), False)))
    for name in _DENY_ALWAYS:
        rule(name, returns(deny_errno))
    if single:
        for name in _DENY_SINGLE_PROCESS + _DENY_METADATA + _DENY_SOCKET_CALLS:
            rule(name, returns(deny_errno))
        for name in _NO_XATTR_READ:
            rule(name, returns(SECCOMP_RET_ERRNO | EOPNOTSUPP))
        rule("socketpair", lambda: chain((0, (AF_UNIX,), True)))
        for name, mode_arg in (("mkdir", 1), ("mkdirat", 2)):
            rule(name, lambda i=mode_arg: owner_rwx(i))  # folders the supervisor can measure
        rule("sendto", lambda: chain((4, (0,), True), (5, (0,), True)))  # no address: the peer only
        for name in _PID_ARG0:
            rule(name, lambda: chain((0, (0, me), True)))
        for name in ("setpriority", "getpriority"):
            rule(name, lambda: chain((0, (PRIO_PROCESS,), True), (1, (0, me), True)))
        for name in ("ioprio_set", "ioprio_get"):
            rule(name, lambda: chain((0, (IOPRIO_WHO_PROCESS,), True), (1, (0, me), True)))
        # signals: to this process only, and never the SIGSYS that reads as a sandbox stop
        rule("kill", lambda: chain((0, (me,), True), (1, (signal.SIGSYS,), False)))
        rule("tgkill", lambda: chain((0, (me,), True), (2, (signal.SIGSYS,), False)))
        rule("rt_sigqueueinfo", lambda: chain((0, (me,), True), (1, (signal.SIGSYS,), False)))
        rule("rt_tgsigqueueinfo", lambda: chain((0, (me,), True), (2, (signal.SIGSYS,), False)))
    else:
        rule("socket", lambda: chain((0, (AF_UNIX,), True)))
        # no SIGSYS by any process of the run to any other: only the filter's own kill reads as a
        # sandbox stop (the runner, PID 1 of its namespace, ignores it anyway)
        for name, sig_arg in (
            ("kill", 1),
            ("tkill", 1),
            ("tgkill", 2),
            ("rt_sigqueueinfo", 1),
            ("rt_tgsigqueueinfo", 2),
        ):
            rule(name, lambda i=sig_arg: chain((i, (signal.SIGSYS,), False)))
    bpf.ret(SECCOMP_RET_ALLOW)
    raw = bpf.assemble()
    ctypes, libc = _libc()
    filters = ctypes.create_string_buffer(raw, len(raw))
    fprog = struct.pack("=HxxxxxxQ", len(raw) // 8, ctypes.addressof(filters))
    fprog_buf = ctypes.create_string_buffer(fprog, len(fprog))
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog_buf, 0, 0), "seccomp")


# --- the audit hook ------------------------------------------------------------------------------
_BLOCKED_EVENTS = frozenset(
    {
        "socket.__new__",
        "socket.bind",
        "socket.connect",
        "socket.getaddrinfo",
        "socket.sendto",
        "socket.sendmsg",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.cdata",
        "ctypes.call_function",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        "sys.remote_exec",
    }
)
_PROCESS_EVENTS = frozenset(
    {"os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen"}
)
_BLOCKED_IMPORTS = frozenset({"ctypes", "_ctypes"})
_PATH_EVENTS = frozenset(
    {
        "os.chmod",
        "os.chown",
        "os.link",
        "os.mkdir",
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.symlink",
        "os.truncate",
        "os.utime",
        "os.listdir",
        "os.scandir",
        "os.chdir",
        "shutil.rmtree",
    }
)


def _install_audit_hook(workdir: str, read_roots: list[str], allow_processes: bool, tripwire: object) -> None:
    """Stop the run on opening a file outside the working folder (reading the Python directories
    is allowed), on sockets, ctypes, signals to others, and on new processes when the sandbox
    allows none. A second line of defence behind the kernel's, which the code can switch off:
    the run's status never depends on it. It stops the run through the seccomp filter's tripwire
    (``SIGSYS``, seen by the supervisor), else by ``SIGSYS`` to itself, else exit status 1."""
    realpath, fsdecode, write, exit_ = os.path.realpath, os.fsdecode, os.write, os._exit
    kill, getpid, set_signal = os.kill, os.getpid, signal.signal
    inside_work = os.path.realpath(workdir).rstrip("/") + "/"
    roots = tuple(os.path.realpath(r).rstrip("/") + "/" for r in read_roots)
    devices = frozenset({"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/full"})
    blocked = _BLOCKED_EVENTS if allow_processes else _BLOCKED_EVENTS | _PROCESS_EVENTS
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    busy = [False]

    def deny(what: str) -> None:
        try:
            write(2, f"\nsandbox: blocked {what[:200]}\n".encode("utf-8", "replace"))
        finally:
            try:
                tripwire(TRIPWIRE_NR)  # type: ignore[operator]
                set_signal(signal.SIGSYS, signal.SIG_DFL)
                kill(getpid(), signal.SIGSYS)
            finally:
                exit_(1)

    def allowed(path: object, writing: bool) -> bool:
        if isinstance(path, int) or path is None:
            return True
        try:
            full = realpath(fsdecode(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        if (full + "/").startswith(inside_work) or full in devices:
            return True
        return not writing and (full + "/").startswith(roots)

    def hook(event: str, args: tuple) -> None:
        if busy[0]:
            return
        busy[0] = True
        try:
            if event == "open":
                path, mode, flags = (*args, None, None, 0)[:3]
                writing = any(c in str(mode or "") for c in "wax+") or bool((flags or 0) & write_flags)
                if not allowed(path, writing):
                    deny(f"open({path!r})")
            elif event in blocked:
                deny(event)
            elif event == "import" and str(args[0]).partition(".")[0] in _BLOCKED_IMPORTS:
                deny(f"import {args[0]}")
            elif event in _PATH_EVENTS:
                reading = event in ("os.listdir", "os.scandir", "os.chdir")
                for path in args[:2] if event in ("os.rename", "os.link", "os.symlink") else args[:1]:
                    if not allowed(path, not reading):
                        deny(f"{event}({path!r})")
        finally:
            busy[0] = False

    sys.addaudithook(hook)


# --- running the code ----------------------------------------------------------------------------
def _run_code(code: bytes, workdir: str, cfg: dict, tripwire: object) -> None:
    import builtins
    import linecache
    import traceback

    os.closerange(3, 1 << 16)
    source = code.decode("utf-8", "replace")
    linecache.cache["<code>"] = (len(source), None, source.splitlines(True), "<code>")
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    for name in [m for m in sys.modules if m.partition(".")[0] in _BLOCKED_IMPORTS]:
        del sys.modules[name]
    if cfg.get("audit_hook", True):
        allow_processes = cfg["mode"] in ("namespaces", "userns") and int(cfg["max_processes"]) > 1
        _install_audit_hook(workdir, cfg["read_paths"], allow_processes, tripwire)
    del tripwire
    status = 0
    try:
        exec(compile(source, "<code>", "exec"), namespace)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            # as the shell reads it, except that no value but 0 may end as status 0 (256 would)
            status = int(e.code or 0)
            status = status if 0 <= status <= 255 else 1
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except BaseException as e:
        tb = e.__traceback__.tb_next if e.__traceback__ and not isinstance(e, SyntaxError) else None
        traceback.print_exception(type(e), e, tb)
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(status)


if __name__ == "__main__":
    main()
