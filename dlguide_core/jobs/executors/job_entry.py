"""A job's process on a scheduler's node: `python -m dlguide_core.jobs.executors.job_entry JOB_ID [-- COMMAND...]`.

The batch script (Slurm) or the entrypoint (Ray) runs this. It opens the store the environment names
(DLGUIDE_STORE_URL, else DLGUIDE_HOME's SQLite file; a store that cannot be opened ends it at once with that
one line), claims the job (queued -> running, with pid, host and boot id: jobs.liveness), then runs it: the job
runner in this process, or COMMAND (srun + torchrun over jobs.worker) as a child that TERM and INT are
passed on to. TERM is the scheduler's warning before a kill (Slurm's time limit, `scancel --signal=TERM`):
the run stops at its next step with a checkpoint and becomes `interrupted`, or `cancelled` when the store's
cancel flag was set. A TERM that arrives before the loop starts is kept and honoured at the first step.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store is imported only once the signals are set (see main)
    from dlguide_core.jobs.store import JobStore

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _EarlySignal:
    """TERM/INT seen before the run's own handlers are set: the run stops at its first step."""

    def __init__(self) -> None:
        self.seen: int | None = None
        self.child: subprocess.Popen | None = None

    def handle(self, signum: int, _frame: object) -> None:
        self.seen = self.seen or signum
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)  # srun passes it on to every task (torchrun agents -> workers)


def _open_store(job_id: str) -> JobStore | None:
    from dlguide_core.errors import first_line
    from dlguide_core.jobs.store import open_store
    from dlguide_core.jobs.store_url import mask

    try:
        return open_store()
    except Exception as exc:  # noqa: BLE001 - any failure to open is the same one line, and the job cannot go on
        detail = first_line(mask(str(exc))) or type(exc).__name__  # masked before it is cut
        print(f"job {job_id}: the job store cannot be opened here ({detail}); "
              "set DLGUIDE_STORE_URL to a store every node reaches (see docs/CLUSTERS.md)", file=sys.stderr,
              flush=True)
        return None


def _claim(store: JobStore, job_id: str) -> bool:
    from dlguide_core.jobs import liveness
    from dlguide_core.jobs.store import JobError

    try:
        store.claim(job_id, os.getpid())
    except JobError as exc:  # cancelled while pending, or already running elsewhere
        print(f"job {job_id}: not started: {exc}", flush=True)
        return False
    host, _ = liveness.process_identity()  # claim recorded it with the pid (JobStore.set_pid)
    print(f"job {job_id} running in process {os.getpid()} on {host}", flush=True)
    return True


def _run_inline(store: JobStore, job_id: str, early: _EarlySignal) -> str:
    from dlguide_core.jobs.runner import run_job
    from dlguide_core.training.sinks import ConsoleSink, NullSink, TeeSink

    class _Early(NullSink):
        def should_stop(self) -> bool:
            return early.seen is not None

    return run_job(store, job_id, TeeSink(ConsoleSink(every=50, stream=sys.stdout), _Early()))


def _run_command(store: JobStore, job_id: str, command: Sequence[str], early: _EarlySignal) -> str:
    early.child = subprocess.Popen(list(command))
    if early.seen is not None:
        early.child.send_signal(early.seen)
    code = early.child.wait()
    job = store.get(job_id, refresh=False)
    if job.status == "running":  # the processes ended and no writer rank recorded an ending
        store.finish(job_id, "interrupted", f"{command[0]} exited with code {code} before the job finished; "
                     "resume continues it")
    return store.get(job_id, refresh=False).status


def main(argv: list[str] | None = None) -> int:
    from dlguide_core import threads

    threads.declare("job")  # before torch loads here or in COMMAND's processes, which inherit the environment
    early = _EarlySignal()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, early.handle)
    args = sys.argv[1:] if argv is None else argv
    command = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    if len(args) != 1:
        print("usage: python -m dlguide_core.jobs.executors.job_entry JOB_ID [-- COMMAND...]", file=sys.stderr)
        return EXIT_USAGE
    job_id = args[0]
    store = _open_store(job_id)
    if store is None:
        return EXIT_FAILED
    if not _claim(store, job_id):
        return EXIT_OK
    status = _run_command(store, job_id, command, early) if command else _run_inline(store, job_id, early)
    print(f"job {job_id} {status}", flush=True)
    return EXIT_OK if status in ("succeeded", "interrupted", "cancelled") else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
