"""Whether a running job's process still lives, and if not, why (the `interrupted` job's message).

A process is known by its pid and its start time (a pid can be reused); one we launched is our
child, whose exit status names the signal that killed it. The job log's tail says the rest.
A pid means something only where it was taken: on that host, since that boot, in that PID namespace
(`process_identity`). A reader anywhere else (another node, a second container on the same volume)
cannot see the process and must not judge it (`can_judge`): a scheduler's status speaks for it.

A local job whose process cannot be seen from here (another host, another boot, or another PID namespace: a
container restarted on the same volume) is told apart from a dead one by its heartbeat: its store sink touches
`heartbeat` in the job folder every HEARTBEAT_S, from a thread of its own. A job alive elsewhere keeps it fresh
and is left alone; one quiet for UNSEEN_GRACE_S (its heartbeat and log, the bounded wait) has no process anywhere
(`unseen_reason`), and becomes `interrupted`, which can be resumed or deleted.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from dlguide_core.jobs.torchrun_log import torchrun_root_cause

LAUNCH_GRACE_S = 120.0  # a claimed job whose process never registered is given up after this
HEARTBEAT_FILE = "heartbeat"  # in the job folder; its mtime is the job process's last sign of life
HEARTBEAT_S = 30.0  # how often a job process touches it
UNSEEN_GRACE_S = 600.0  # a process not visible from here and quiet this long is gone (20 missed heartbeats)


def process_start(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch); None when there is no such process."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def boot_id() -> str:
    """This kernel's boot id, with the PID namespace: together the scope in which a pid names one process."""
    try:
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    except OSError:
        import psutil

        boot = f"boot-{psutil.boot_time():.0f}"
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]": differs in another container
    except OSError:
        namespace = "pid:[?]"
    return f"{boot} {namespace}"


def process_identity() -> tuple[str, str]:
    """(host, boot id) of this process: recorded with every job's pid."""
    return socket.gethostname(), boot_id()


def can_judge(host: str | None, boot: str | None) -> bool:
    """Whether this process may check a pid recorded on `host` with `boot`: only on the same host, boot and PID
    namespace. Jobs recorded before hosts were kept (None) are judged here, as before."""
    if host is None and boot is None:
        return True
    return (host, boot) == process_identity()


def where_unseen(host: str | None, boot: str | None) -> str:
    """Why a pid recorded on `host` with `boot` cannot be checked from here, in words."""
    here_host, here_boot = process_identity()
    if host != here_host:
        return f"on host {host}"
    kernel, _, _ = (boot or "").partition(" ")
    if kernel != here_boot.partition(" ")[0]:
        return f"on {host} before its last restart"
    return f"on {host} in another PID namespace (a container since restarted?)"


def touch_heartbeat(folder: Path) -> None:
    """The job process's sign of life (its store sink's writer thread calls this every HEARTBEAT_S)."""
    try:
        (folder / HEARTBEAT_FILE).touch()
    except OSError:
        pass  # a folder removed meanwhile, a read-only share: the log's own writes still count


def last_sign_of_life(folder: Path, started: float | None) -> float:
    """The latest of the job's start, its heartbeat and its log's last write (seconds since the epoch)."""
    times = [started or 0.0]
    for name in (HEARTBEAT_FILE, "job.log"):
        try:
            times.append((folder / name).stat().st_mtime)
        except OSError:
            pass
    return max(times)


def unseen_reason(host: str | None, boot: str | None, folder: Path, started: float | None) -> str | None:
    """For a process this host cannot check: None while it may live elsewhere (a sign of life within
    UNSEEN_GRACE_S), else why the job is taken as ended."""
    quiet = time.time() - last_sign_of_life(folder, started)
    if quiet < UNSEEN_GRACE_S:
        return None
    return (f"its process ({where_unseen(host, boot)}) is not visible from here and gave no sign of life for "
            f"{quiet / 60:.0f} min; resume continues it from its checkpoint")


def death_reason(pid: int | None, pid_started: float | None, started: float | None, log: Path) -> str | None:
    """None while the job's process lives; otherwise why we think it is gone."""
    if pid is None:
        if started and time.time() - started > LAUNCH_GRACE_S:
            return "the job process never started (see its log)"
        return None
    reason = _reap(pid) or _gone(pid, pid_started, started)
    if reason is None:
        return None
    tail = _log_tail(log)
    cause = torchrun_root_cause(tail)
    if cause:  # a distributed job: torchrun names the rank that failed first, and how
        return f"process {pid} ended without finishing ({reason}); torchrun: {cause}"
    last = next((line for line in reversed(tail) if line.strip("=-_* ")), None)  # skip separator rules
    return f"process {pid} ended without finishing ({reason})" + (f"; last log line: {last[:200]}" if last else "")


def _reap(pid: int) -> str | None:
    # If the job is our child (we launched it), collect its exit status: that names the signal.
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        return None
    if done != pid:
        return None
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.WEXITSTATUS(status)}"


def _gone(pid: int, pid_started: float | None, started: float | None) -> str | None:
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:  # it died since _reap looked: collect its status now
            return _reap(pid) or "the process exited"
        if pid_started is not None and abs(proc.create_time() - pid_started) > 1.0:
            return "its pid now belongs to another process"
        return None
    except psutil.NoSuchProcess:
        if started and psutil.boot_time() > started:
            return "the machine restarted"
        return "killed, out of memory, or its terminal closed"
    except psutil.Error:
        return None


def _log_tail(path: Path, size: int = 8192) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - size))
            return [line.strip() for line in fh.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return []
