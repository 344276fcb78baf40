"""Whether a running job's process still lives, and if not, why (the `interrupted` job's message).

A process is known by its pid and its start time (a pid can be reused); one we launched is our
child, whose exit status names the signal that killed it. The job log's tail says the rest.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from dlguide_core.jobs.torchrun_log import torchrun_root_cause

LAUNCH_GRACE_S = 120.0  # a claimed job whose process never registered is given up after this


def process_start(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch); None when there is no such process."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


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
