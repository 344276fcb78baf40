"""A job's process on a scheduler's node: `python -m dlguide_core.jobs.executors.job_entry JOB_ID [-- COMMAND...]`.

The batch script (Slurm) or the entrypoint (Ray) runs this. It opens the store the environment names
(DLGUIDE_STORE_URL, else DLGUIDE_HOME's SQLite file; a store that cannot be opened ends it at once with that
one line), claims the job (queued -> running, with pid, host and boot id: jobs.liveness), then runs it: the job
runner in this process, or COMMAND (srun + torchrun over jobs.worker) as a child that TERM and INT are
passed on to. TERM is the scheduler's warning before a kill (Slurm's time limit, `scancel --signal=TERM`):
the run stops at its next step with a checkpoint and becomes `interrupted`, or `cancelled` when the store's
cancel flag was set. A TERM that arrives before the loop starts is kept and honoured at the first step.
It names no scheduler: the job's executor's hooks (the row's `executor`, jobs.executors.node_hooks) claim the
job (`NodeHooks.claim`: Slurm takes a requeued job back) and judge a stop once, here, before the ending is written
(`NodeHooks.judge_stop`: for Slurm, who stopped it, jobs.executors.slurm_node).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store is imported only once the signals are set (see main)
    from dlguide_core.jobs.executors.base import NodeHooks
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


def _executor(store: JobStore, job_id: str) -> NodeHooks:
    """The job's executor's hooks on this node, by its row (JobError for an unknown job)."""
    from dlguide_core.jobs.executors import node_hooks

    return node_hooks.for_executor(store.get(job_id, refresh=False).executor)


def _claim(store: JobStore, job_id: str) -> bool:
    from dlguide_core.jobs import liveness
    from dlguide_core.jobs.store import JobError

    try:
        if not _executor(store, job_id).claim(store, job_id):
            return False
    except JobError as exc:  # cancelled while pending, or already running elsewhere
        print(f"job {job_id}: not started: {exc}", flush=True)
        return False
    host, _ = liveness.process_identity()  # claim recorded it with the pid (JobStore.set_pid)
    print(f"job {job_id} running in process {os.getpid()} on {host}", flush=True)
    print(f"job {job_id}: devices from the scheduler: {_bound_devices()}", flush=True)
    return True


def _bound_devices() -> str:
    """The GPU binding the scheduler set (CUDA_/ROCR_/HIP_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL), as it is."""
    names = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")
    bound = [f"{name}={os.environ[name]}" for name in names if name in os.environ]
    return " ".join(bound) if bound else "none (no GPU bound)"


def _settle(store: JobStore, job_id: str, status: str, signalled: bool) -> str:
    """After COMMAND's ranks recorded their ending: the stop judged by the job's executor (NodeHooks.judge_stop)."""
    error = store.get(job_id, refresh=False).error
    decided, reason = _executor(store, job_id).judge_stop(store, job_id, status, error, signalled=signalled)
    if decided not in (status, "queued"):
        store.finish(job_id, decided, reason)
    return decided


def _run_inline(store: JobStore, job_id: str, early: _EarlySignal) -> str:
    from dlguide_core.jobs.runner import run_job
    from dlguide_core.training.sinks import ConsoleSink, NullSink, TeeSink

    class _Early(NullSink):
        def should_stop(self) -> bool:
            return early.seen is not None

    executor = _executor(store, job_id)
    return run_job(store, job_id, TeeSink(ConsoleSink(every=50, stream=sys.stdout), _Early()),
                   decide=lambda status, error: executor.judge_stop(store, job_id, status, error))


def _run_command(store: JobStore, job_id: str, command: Sequence[str], early: _EarlySignal) -> tuple[str, bool]:
    """(the status the ranks left, whether a stop signal reached the job: this process got one, or the ranks
    stopped cleanly at one, exit 0 short of the end; a rank killed or a lost peer fails the command instead)."""
    early.child = subprocess.Popen(list(command))
    if early.seen is not None:
        early.child.send_signal(early.seen)
    code = early.child.wait()
    job = store.get(job_id, refresh=False)
    if job.status == "running":  # the processes ended and no writer rank recorded an ending
        store.finish(job_id, "interrupted", f"{command[0]} exited with code {code} before the job finished; "
                     "resume continues it")
    return store.get(job_id, refresh=False).status, early.seen is not None or code == 0


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
    if command:
        status = _settle(store, job_id, *_run_command(store, job_id, command, early))
    else:
        status = _run_inline(store, job_id, early)
    print(f"job {job_id} {status}", flush=True)
    return EXIT_OK if status in ("succeeded", "interrupted", "cancelled", "queued") else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
