"""The sandbox's spawner: one long-lived process that starts every run, so the trainer never forks.

Started once per trainer process by :mod:`envs.code.sandbox` as ``python -I -S -B
_sandbox_spawner.py <fd> [<autogroup nice>]`` in a session of its own, where ``<fd>`` is its end
of a unix ``SOCK_SEQPACKET`` socket pair (the *control* socket); it gives its session's autogroup
the trainer's autogroup nice (:func:`join_autogroup_nice`). It imports only the standard
library. Why a process of its own: creating a process from a thread of the trainer holds the
trainer's GIL until the child has exec'd (CPython 3.11's ``_posixsubprocess`` keeps it across
``vfork``), and on a loaded machine that child can wait a long time for a CPU, stalling the event
loop for that long. Here only this process waits.

Protocol (one JSON object per message, descriptors passed with ``SCM_RIGHTS``):

- a request on the control socket: ``{"argv": [...], "config": {...}}`` with four descriptors:
  the run's *channel* (a ``SOCK_SEQPACKET`` socket of its own), the run's stdin, its output pipe
  (stdout and stderr) and its status pipe. The spawner starts ``argv + [json(config)]`` in a
  process group of its own (in this process's session: see :func:`join_autogroup_nice`), in
  ``/``, with an empty environment, every other descriptor closed, the status pipe kept and its
  number written into ``config["status_fd"]``, at the nice value ``config["nice"]`` from its
  first instruction on (:func:`_lowered`); then it closes its copies;
- on the channel it answers ``{"pid": n}`` (or ``{"error": "..."}``), and later ``{"exited":
  true}`` once the process has ended. It does not reap the process before the trainer closes its
  end of the channel: until then the process id, and so its process group id, cannot be reused,
  and the trainer may ``killpg`` it safely;
- when the trainer closes a channel (the run is over, or was abandoned), the spawner kills the
  process group (``SIGKILL``; nothing is left of a finished run) and reaps the process;
- when the control socket closes (the trainer ended, however it ended), the spawner kills and
  reaps every process it started, removes their memory cgroups (``config["cgroup"]``, which the
  trainer would have removed) and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time

MAX_REQUEST = 1 << 17
"""Largest request accepted (the configuration; the code itself goes through the stdin pipe)."""


class _Run:
    """One started process and its channel."""

    def __init__(self, channel: socket.socket, proc: subprocess.Popen[bytes], cgroup: str | None):
        self.channel = channel
        self.proc = proc
        self.cgroup = cgroup  # the run's memory cgroup, which the trainer removes (else: see serve)
        self.told = False  # "exited" sent
        try:  # readable once the process has ended (it stays unreaped)
            self.pidfd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self.pidfd = None  # Linux < 5.3: polled with waitid instead

    def exited(self) -> bool:
        """Whether the process has ended (observed without reaping it)."""
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True


def _send(channel: socket.socket, obj: dict) -> bool:
    try:
        channel.send(json.dumps(obj).encode())
        return True
    except OSError:
        return False


def _lowered(nice: int) -> None:
    """In the child, before it execs: the run's priority, which it cannot raise again.

    Its nice value becomes ``nice`` (never lower than it is), and ``RLIMIT_NICE`` 0 (soft and
    hard) means a process without ``CAP_SYS_NICE`` cannot lower it again (the runner has none).
    Set here rather than by the run's own first lines, so that its interpreter's start-up already
    runs below the trainer. The run stays in this process's session (see :func:`main`); the code
    cannot start a session of its own (seccomp, every mode).
    """
    if nice > os.getpriority(os.PRIO_PROCESS, 0):
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    resource.setrlimit(resource.RLIMIT_NICE, (0, 0))


def _start(request: bytes, fds: list[int]) -> _Run | None:
    """Start one run; None when the request was malformed (its descriptors closed)."""
    if len(fds) != 4:
        for fd in fds:
            os.close(fd)
        return None
    channel = socket.socket(fileno=fds[0])
    stdin, output, status = fds[1:]
    try:
        message = json.loads(request)
        config = dict(message["config"])
        config["status_fd"] = status
        argv = [str(a) for a in message["argv"]] + [json.dumps(config)]
        nice = min(19, int(config.get("nice", 0)))
        session = bool(message.get("session"))  # a session per run: the bench's "before" side
        proc = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=output,
            stderr=output,
            pass_fds=(status,),
            close_fds=True,
            start_new_session=session,
            process_group=None if session else 0,  # killpg reaches the run alone
            preexec_fn=lambda: _lowered(nice),  # fork-safe: this process has one thread
            cwd="/",
            env={},
        )
    except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError) as e:
        _send(channel, {"error": f"{type(e).__name__}: {e}"})
        channel.close()
        return None
    finally:
        for fd in (stdin, output, status):
            os.close(fd)
    channel.setblocking(False)
    run = _Run(channel, proc, config.get("cgroup"))
    if not _send(channel, {"pid": proc.pid}):
        _end(run)
        return None
    return run


def _end(run: _Run) -> None:
    """Kill what is left of the run's process group, reap its leader, close the channel."""
    with contextlib.suppress(OSError):
        os.killpg(run.proc.pid, signal.SIGKILL)
    run.proc.wait()  # SIGKILL: it ends at once
    if run.pidfd is not None:
        os.close(run.pidfd)
    run.channel.close()


POLL_S = 0.05
"""How often runs are checked for their end where there are no pidfds (Linux < 5.3)."""


def serve(control: socket.socket) -> None:
    """Answer requests on ``control`` until it closes; then end every run left.

    No signal handling: a run's end is seen on its pidfd.
    """
    runs: dict[int, _Run] = {}  # by channel descriptor
    ending: dict[int, _Run] = {}  # by pidfd
    poller = select.poll()
    poller.register(control, select.POLLIN)

    def drop(run: _Run) -> None:
        runs.pop(run.channel.fileno(), None)
        poller.unregister(run.channel)
        if run.pidfd is not None and ending.pop(run.pidfd, None) is not None:
            poller.unregister(run.pidfd)
        _end(run)

    def tell(run: _Run) -> None:
        run.told = True
        if run.pidfd is not None and ending.pop(run.pidfd, None) is not None:
            poller.unregister(run.pidfd)
        if not _send(run.channel, {"exited": True}):
            drop(run)

    try:
        while True:
            polled = any(r.pidfd is None and not r.told for r in runs.values())
            events = poller.poll(int(POLL_S * 1000) if polled else None)
            # the control socket last: a request opens descriptors, which may take the number of
            # one closed above, and no event of this batch may be read as the new one's
            for fd, _events in sorted(events, key=lambda event: event[0] == control.fileno()):
                if fd == control.fileno():
                    try:
                        request, fds, _flags, _addr = socket.recv_fds(
                            control, MAX_REQUEST, 4, socket.MSG_CMSG_CLOEXEC
                        )
                    except InterruptedError:
                        continue
                    if not request and not fds:
                        return  # the trainer is gone
                    run = _start(request, fds)
                    if run is not None:
                        runs[run.channel.fileno()] = run
                        poller.register(run.channel, select.POLLIN)
                        if run.pidfd is not None:
                            ending[run.pidfd] = run
                            poller.register(run.pidfd, select.POLLIN)
                elif fd in ending:  # the process ended
                    tell(ending[fd])
                elif fd in runs:  # the trainer closed the channel (or wrote to it): the run is over
                    drop(runs[fd])
            if polled:
                for run in list(runs.values()):
                    if run.pidfd is None and not run.told and run.exited():
                        tell(run)
    finally:  # the trainer is gone: end its runs, and remove their cgroups in its place
        for run in list(runs.values()):
            _end(run)
        for run in runs.values():
            for _ in range(500):  # a run's last processes may still be leaving it
                try:
                    if run.cgroup:
                        os.rmdir(run.cgroup)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


AUTOGROUP_TRIES = 50
"""How often the autogroup's nice is tried (20 ms apart): a user without root may renice an
autogroup only ten times a second, machine-wide."""


def join_autogroup_nice(nice: int, path: str = "/proc/self/autogroup") -> bool:
    """Give this session's autogroup (``sched_autogroup``) the nice value ``nice``; whether it took.

    Every run is a process of this session, so under ``sched_autogroup`` all of them share one
    autogroup: the scheduler shares the CPU between autogroups first, so the runs together weigh
    as much as the trainer's own session (at ``nice``: the trainer's autogroup's), however many
    there are, and the trainer's event loop gets its turn promptly when it wakes. A session per
    run made 64 runs weigh as 64 sessions against the trainer's one (and their interpreters
    started at an autogroup nice of 0 before they could renice it, which a user without root is
    refused more than ten times a second). Machines without autogroups (a cgroup per service or
    container) schedule by the runs' nice values instead (:func:`_lowered`).
    """
    try:
        with open(path) as f:
            if int(f.read().rsplit(None, 1)[-1]) == nice:
                return True
    except (OSError, ValueError, IndexError):
        return False
    for _ in range(AUTOGROUP_TRIES):
        try:
            with open(path, "w") as f:
                f.write(str(nice))
            return True
        except BlockingIOError:  # EAGAIN: another autogroup was reniced less than 0.1 s ago
            time.sleep(0.02)
        except OSError:  # no autogroups here, or not allowed (below this session's nice)
            return False
    return False


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    os.set_inheritable(control.fileno(), False)
    if len(sys.argv) > 2:  # the trainer's autogroup nice (none where /proc/self/autogroup says nothing)
        join_autogroup_nice(int(sys.argv[2]))
    serve(control)


if __name__ == "__main__":
    main()
