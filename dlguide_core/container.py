"""The image's entry under tini: `python -m dlguide_core.container COMMAND...` (the Dockerfile's ENTRYPOINT).

`docker stop` sends SIGTERM to PID 1 (tini), which passes it to this process only. Local jobs run in sessions of
their own (detached, jobs.queue.launch), so no process group reaches them: without this entry they would be killed
with SIGKILL at the end of Docker's 10 s, mid-step, and stay `running` in the store. Here the signal goes to every
process of the container (`kill(-1)`: each but PID 1 and this one): the server stops, and each job stops at its next
step with a checkpoint, `interrupted`, resumable (jobs.stopping). Then this waits for them all, up to STOP_GRACE_S
from the signal (a command still running then is killed), says in one line how long the stop took, and exits
with the command's status. tini reaps whatever is left an orphan.

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
    status = wait_within_grace(child, stopping)
    if stopping:
        left: list[int] = []
        if whole_container:
            deadline = stopping[0] + STOP_GRACE_S
            while (left := others()) and time.monotonic() < deadline:
                time.sleep(0.1)
        print(f"dlguide: stopped {time.monotonic() - stopping[0]:.1f} s after the signal"
              + (f"; {len(left)} process(es) still running, left to the container's end" if left else ""),
              file=sys.stderr, flush=True)
    return status if status >= 0 else 128 - status


def wait_within_grace(child: subprocess.Popen[bytes], stopping: list[float]) -> int:
    """The command's exit status. Once a stop signal came (`stopping` holds its time), the command has
    STOP_GRACE_S to end; one that has not by then is killed here, so the container still ends before Docker's
    own SIGKILL, with the report of the jobs' stops (exit 137: the command was killed)."""
    while True:
        try:
            return child.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            if stopping and time.monotonic() >= stopping[0] + STOP_GRACE_S:
                print(f"dlguide: the server did not end within {STOP_GRACE_S:.0f} s of the signal: killed",
                      file=sys.stderr, flush=True)
                child.kill()
                return child.wait()


if __name__ == "__main__":
    sys.exit(main())
