"""The image's entry under tini: `python -m dlguide_core.container COMMAND...` (the Dockerfile's ENTRYPOINT).

`docker stop` sends SIGTERM to PID 1 (tini), which passes it to this process only. Local jobs run in sessions of
their own (detached, jobs.queue.launch), so no process group reaches them: without this entry they would be killed
with SIGKILL at the end of Docker's 10 s, mid-step, and stay `running` in the store. Here the signal goes to every
process of the container (`kill(-1)`: each but PID 1 and this one): the server stops, and each job stops at its next
step with a checkpoint, `interrupted`, resumable (jobs.stopping). Then this waits for them all, up to STOP_GRACE_S,
and exits with the command's status. tini reaps whatever is left an orphan.

Only inside a container's own PID namespace: PID 1 must be an init of a container (tini, docker-init) and this
process its child, with DLGUIDE_CONTAINER=1 (the image sets it). Anywhere else a stop is passed to the command
alone, as a plain wrapper would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_GRACE_S = 8.0  # inside Docker's default 10 s between SIGTERM and SIGKILL
CONTAINER_INITS = ("tini", "docker-init")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def own_pid_namespace() -> bool:
    """Whether this process runs right under a container's init, in the container's own PID namespace."""
    if os.environ.get("DLGUIDE_CONTAINER") != "1" or os.getppid() != 1:
        return False
    try:
        init = Path("/proc/1/cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return False
    return os.path.basename(init) in CONTAINER_INITS


def others() -> list[int]:
    """The container's other live processes (not PID 1, not this one; zombies left to tini)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in (1, os.getpid()):
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


def main(argv: list[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if not command:
        print("usage: python -m dlguide_core.container COMMAND [ARG...]", file=sys.stderr)
        return 2
    whole_container = own_pid_namespace()
    child = subprocess.Popen(command)
    stopping: list[float] = []

    def stop(signum: int, _frame: object) -> None:
        if not stopping:
            stopping.append(time.monotonic())
        if whole_container:
            os.kill(-1, signum)  # every process of the container but PID 1 and this one: the server and its jobs
        else:
            child.send_signal(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)
    status = child.wait()
    if whole_container and stopping:
        deadline = stopping[0] + STOP_GRACE_S
        while others() and time.monotonic() < deadline:
            time.sleep(0.1)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
