"""The sandbox's own process: sets up the isolation, then runs the untrusted code.

Run only by :class:`envs.code.sandbox.Sandbox` as ``python -I -S -B -u -X utf8 _sandbox_child.py
<config-json>`` with the code on stdin, the merged stdout/stderr on a pipe and a status pipe as
fd 3. It imports only the standard library (never the project): it must start fast and trust
nothing outside it.

Two processes, so that something unsandboxed always watches the sandboxed one:

- the *supervisor* (this script's first process) reads the code, enters new namespaces (mode
  ``namespaces``), forks the *runner* and waits for it, with its own wall-clock backstop
  (``backstop_s``), then reports the runner's exit status, CPU time and peak memory as one JSON
  line on fd 3;
- the *runner* builds the jail (see :func:`_jail`), drops every privilege, applies rlimits,
  ``PR_SET_NO_NEW_PRIVS``, the seccomp filter and (mode ``landlock``) a Landlock ruleset, installs
  the audit hook, writes ``ready`` on fd 3, closes it, and executes the code in ``__main__``.

Modes (chosen by the parent, see ``Isolation``):

- ``namespaces`` (needs root or CAP_SYS_ADMIN): new mount, PID, network, IPC and UTS namespaces.
  The runner is PID 1 of its PID namespace (when it ends, the kernel kills every process in it);
  the network namespace has only a loopback interface that is down; the root is a fresh tmpfs
  holding read-only bind mounts of the system and Python directories, a few device nodes and a
  size-limited tmpfs ``/sandbox`` (the working directory, ``/tmp`` points there); the old root
  is detached. The runner then switches to an unprivileged user id of its own (``uid``), so
  ``RLIMIT_NPROC`` bounds its processes and it can signal nothing outside.
- ``landlock`` (any user, Linux >= 5.13): same user id with every capability dropped; a Landlock
  ruleset allows reading the system and Python directories and everything in the working folder
  only (TCP bind/connect denied too from Landlock ABI 4; signals and abstract sockets scoped from
  ABI 6); seccomp refuses every new socket and every new process.
- ``rlimits``: resource limits, dropped capabilities and the audit hook only: NOT a security
  boundary (used only when asked for by name).

The seccomp filter (x86-64 and aarch64) refuses with ``EPERM``: sockets other than ``AF_UNIX``
(every socket in ``landlock`` mode), io_uring, ptrace and cross-process memory access, bpf,
perf events, userfaultfd, keyrings, namespace and mount calls, module loading, kexec, handle
opening, and in ``landlock`` mode new processes (fork, vfork, clone without ``CLONE_THREAD``),
``setsid`` / ``setpgid`` and signals to other processes.
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
"""Runner exit status: the jail could not be built (the parent reports a sandbox error)."""
EXIT_VIOLATION = 86
"""Runner exit status: the audit hook stopped a forbidden operation."""
EXIT_MEMORY = 87
"""Runner exit status: an uncaught ``MemoryError`` (the address-space limit)."""

STATUS_FD = 3
"""The status pipe's descriptor (the parent names it in the config's ``status_fd``)."""
WORKDIR_IN_JAIL = "/sandbox"

# --- constants (linux/sched.h, linux/mount.h, linux/prctl.h, linux/seccomp.h, linux/landlock.h) --
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_THREAD = 0x00010000
CLONE_NAMESPACES = 0x7E020000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
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
EPERM, ENOSYS = 1, 38
AF_UNIX = 1

# syscall numbers: (x86_64, aarch64); aarch64 from asm-generic/unistd.h
_ARCH = {"x86_64": 0, "aarch64": 1}
_AUDIT_ARCH = (0xC000003E, 0xC00000B7)
_NR: dict[str, tuple[int, int]] = {
    "socket": (41, 198),
    "clone": (56, 220),
    "clone3": (435, 435),
    "fork": (57, -1),
    "vfork": (58, -1),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
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
}
_DENY_ALWAYS = [
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
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
]
_DENY_SINGLE_PROCESS = [
    "fork",
    "vfork",
    "setsid",
    "setpgid",
    "kill",
    "tkill",
    "tgkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
]

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
    if cfg.get("nice"):
        os.nice(int(cfg["nice"]))
    if cfg.get("autogroup_nice") is not None:  # this session's autogroup (sched_autogroup), see sandbox.py
        with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as f:
            f.write(str(int(cfg["autogroup_nice"])))
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.umask(0o022)
    mode = cfg["mode"]
    try:
        if mode == "namespaces":
            _, libc = _libc()
            flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
            _check(libc.unshare(flags), "unshare")
    except SetupError as e:
        _status({"setup_error": str(e)})
        os._exit(0)
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        _runner(cfg, code, alive_r)  # never returns
    os.close(alive_r)
    report = _supervise(pid, float(cfg["backstop_s"]))
    _status(report)
    os._exit(0)


def _status(obj: dict) -> None:
    with contextlib.suppress(OSError):
        os.write(STATUS_FD, (json.dumps(obj) + "\n").encode())


def _supervise(pid: int, backstop_s: float) -> dict:
    """Wait for the runner (killing it after ``backstop_s``); its exit status and usage."""
    import select

    backstop = False
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd >= 0:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(int(backstop_s * 1000)):
            backstop = True
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
        "backstop": backstop,
    }
    if os.WIFSIGNALED(status):
        report["signal"] = os.WTERMSIG(status)
    else:
        report["exit"] = os.WEXITSTATUS(status)
    return report


# --- the runner ----------------------------------------------------------------------------------
def _runner(cfg: dict, code: bytes, alive_r: int) -> None:
    try:
        workdir = _confine(cfg, alive_r)
    except BaseException as e:
        _status({"setup_error": f"{type(e).__name__}: {e}"})
        os._exit(EXIT_SETUP)
    _status({"ready": True})
    os.close(STATUS_FD)
    _run_code(code, workdir, cfg)


def _confine(cfg: dict, alive_r: int) -> str:
    mode = cfg["mode"]
    workdir = cfg["workdir"]
    uid, gid = cfg.get("uid"), cfg.get("gid")
    if mode == "namespaces":
        _jail(cfg)
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
    _, libc = _libc()
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
        _seccomp(single_process=mode == "landlock", allow_unix=mode == "namespaces")
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    os.environ.clear()
    os.environ.update(env)
    return workdir


def _jail(cfg: dict) -> None:
    """Mount namespace: a fresh tmpfs root with read-only binds, pivoted into."""
    ctypes, libc = _libc()
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

    def mount(
        source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
    ) -> None:
        enc = lambda s: None if s is None else s.encode()  # noqa: E731
        _check(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")

    root = cfg["workdir"]
    uid, gid = cfg["uid"], cfg["gid"]
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
        mount(path, target, None, MS_BIND)
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.makedirs(root + "/dev", exist_ok=True)
    for dev in ("null", "zero", "full", "random", "urandom"):
        target = f"{root}/dev/{dev}"
        open(target, "a").close()
        mount(f"/dev/{dev}", target, None, MS_BIND)
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_NOSUID)
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
    if mode == "namespaces" or (mode == "rlimits" and os.getuid() != 0):
        # counts every task of the (real) user: in namespaces mode that user is the sandbox's own;
        # in landlock mode seccomp refuses new processes instead
        cap(resource.RLIMIT_NPROC, int(cfg["max_processes"]))


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
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith((b"CapEff:", b"CapPrm:")) and int(line.split()[1], 16):
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


def _seccomp(*, single_process: bool, allow_unix: bool) -> None:
    machine = os.uname().machine
    if machine not in _ARCH:
        raise SetupError(f"no seccomp filter for {machine}")
    arch = _ARCH[machine]
    deny = {_NR[name][arch] for name in _DENY_ALWAYS}
    if single_process:
        deny |= {_NR[name][arch] for name in _DENY_SINGLE_PROCESS}
    deny.discard(-1)
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    # (code, jt, jf, k) with jt/jf as labels resolved below
    prog: list[tuple[int, object, object, int]] = [
        (ld_abs, 0, 0, 4),  # arch
        (jeq, 0, "kill", _AUDIT_ARCH[arch]),
        (ld_abs, 0, 0, 0),  # syscall number
    ]
    if machine == "x86_64":
        prog.append((jge, "deny", 0, 0x40000000))  # the x32 ABI
    prog.append((jeq, "socket", 0, _NR["socket"][arch]))
    prog.append((jeq, "clone", 0, _NR["clone"][arch]))
    prog.append((jeq, "enosys", 0, _NR["clone3"][arch]))  # glibc falls back to clone, which is checked
    for nr in sorted(deny):
        prog.append((jeq, "deny", 0, nr))
    labels: dict[str, int] = {}
    prog.append((0x05, 0, 0, 0))  # ja: jump to "allow" (patched below)
    tail = [
        ("socket", (ld_abs, 0, 0, 16)),  # args[0] (low half): the address family
        (None, (jeq, "allow" if allow_unix else "deny", "deny", AF_UNIX)),
        ("clone", (ld_abs, 0, 0, 16)),  # args[0] (low half): the clone flags
        (None, (jset, "deny", 0, CLONE_NAMESPACES)),
        (None, (jset, "allow", "deny" if single_process else "allow", CLONE_THREAD)),
        ("allow", (ret, 0, 0, SECCOMP_RET_ALLOW)),
        ("deny", (ret, 0, 0, SECCOMP_RET_ERRNO | EPERM)),
        ("enosys", (ret, 0, 0, SECCOMP_RET_ERRNO | ENOSYS)),
        ("kill", (ret, 0, 0, SECCOMP_RET_KILL_PROCESS)),
    ]
    for label, insn in tail:
        if label:
            labels[label] = len(prog)
        prog.append(insn)
    jump_at = labels["socket"] - 1
    prog[jump_at] = (0x05, 0, 0, labels["allow"] - jump_at - 1)  # BPF_JMP|BPF_JA: k is the offset

    def target(at: int, jump: object) -> int:
        if isinstance(jump, str):
            offset = labels[jump] - at - 1
            if not 0 <= offset < 256:
                raise SetupError("seccomp jump out of range")
            return offset
        return int(jump)  # type: ignore[call-overload]

    raw = b"".join(
        struct.pack("=HBBI", code, target(i, jt), target(i, jf), k)
        for i, (code, jt, jf, k) in enumerate(prog)
    )
    ctypes, libc = _libc()
    filters = ctypes.create_string_buffer(raw, len(raw))
    fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(filters))
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


def _install_audit_hook(workdir: str, read_roots: list[str], allow_processes: bool) -> None:
    """Stop the run (exit :data:`EXIT_VIOLATION`) on opening a file outside the working folder
    (reading the Python directories is allowed), on sockets, ctypes, signals to others, and on
    new processes when the sandbox allows none. A second line of defence behind the kernel's."""
    realpath, fsdecode, write, exit_ = os.path.realpath, os.fsdecode, os.write, os._exit
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
            exit_(EXIT_VIOLATION)

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
def _run_code(code: bytes, workdir: str, cfg: dict) -> None:
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
        allow_processes = cfg["mode"] == "namespaces" and int(cfg["max_processes"]) > 1
        _install_audit_hook(workdir, cfg["read_paths"], allow_processes)
    status = 0
    try:
        exec(compile(source, "<code>", "exec"), namespace)
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            status = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except MemoryError as e:
        traceback.print_exception(type(e), e, e.__traceback__.tb_next if e.__traceback__ else None)
        status = EXIT_MEMORY
    except BaseException as e:
        tb = e.__traceback__.tb_next if e.__traceback__ and not isinstance(e, SyntaxError) else None
        traceback.print_exception(type(e), e, tb)
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(status & 0xFF if status >= 0 else 1)


if __name__ == "__main__":
    main()
