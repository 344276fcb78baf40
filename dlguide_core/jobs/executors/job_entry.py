"""A job's process on a scheduler's node: `python -m dlguide_core.jobs.executors.job_entry JOB_ID [-- COMMAND...]`.

The batch script (Slurm) or the entrypoint (Ray) runs this. It opens the store the environment names
(DLGUIDE_STORE_URL, else DLGUIDE_HOME's SQLite file; a store that cannot be opened ends it at once with that
one line), claims the job (queued -> running, with pid, host and boot id: jobs.liveness), then runs it: the job
runner in this process, or COMMAND (srun + torchrun over jobs.worker) as a child that TERM and INT are
passed on to. TERM is the scheduler's warning before a kill (Slurm's time limit, `scancel --signal=TERM`):
the run stops at its next step with a checkpoint and becomes `interrupted`, or `cancelled` when the store's
cancel flag was set. A TERM that arrives before the loop starts is kept and honoured at the first step.
In a Slurm job the stop is then judged once, here (jobs.executors.slurm_stop): a user's plain `scancel` is a
cancel, a preemption or requeue sends the job back to queued for Slurm's next run of it, which takes the same
dlguide job back (SLURM_RESTART_COUNT > 0: `JobStore.take_back`, one more restart) and resumes it from its
checkpoint, up to --max-requeues.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store is imported only once the signals are set (see main)
    from dlguide_core.jobs.executors.slurm_stop import RequeuePolicy
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
    from dlguide_core.jobs.executors import slurm_stop
    from dlguide_core.jobs.store import JobError

    restart, external = slurm_stop.restart_count(), slurm_stop.slurm_job_id()
    try:
        if restart and external:  # Slurm runs this job again: the same dlguide job, taken back
            if not _under_requeue_cap(store, job_id):
                return False
            job = store.take_back(job_id, os.getpid(), external, _unseen_stop(job_id, external))
            print(f"job {job_id}: Slurm's restart {restart} ({job.restart_note}); resuming from checkpoint step "
                  f"{job.checkpoint_step or 0}", flush=True)
        else:
            store.claim(job_id, os.getpid())
    except JobError as exc:  # cancelled while pending, or already running elsewhere
        print(f"job {job_id}: not started: {exc}", flush=True)
        return False
    host, _ = liveness.process_identity()  # claim recorded it with the pid (JobStore.set_pid)
    print(f"job {job_id} running in process {os.getpid()} on {host}", flush=True)
    print(f"job {job_id}: devices from the scheduler: {_bound_devices()}", flush=True)
    return True


def _unseen_stop(job_id: str, external: str) -> str | None:
    """The note of the previous run's stop when that run could not record it (Slurm killed its batch script first,
    as a node failure's requeue can while the script still waits on srun): the cause in that run's part of the
    output (slurm_stop.unseen_stop_note), None when the output says nothing."""
    from dlguide_core.jobs.executors import slurm_stop

    return slurm_stop.unseen_stop_note(_last_run_cause(job_id, external, _fields(external)))


def _bound_devices() -> str:
    """The GPU binding the scheduler set (Slurm's gres: CUDA_/ROCR_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL), as is."""
    names = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")
    bound = [f"{name}={os.environ[name]}" for name in names if name in os.environ]
    return " ".join(bound) if bound else "none (no GPU bound)"


def _under_requeue_cap(store: JobStore, job_id: str) -> bool:
    """False (and the job ended interrupted, saying why) once Slurm has requeued it --max-requeues times."""
    cap = _slurm_options(job_id).max_requeues
    job = store.get(job_id, refresh=False)
    if job.restarts < cap:
        return True
    if job.status in ("queued", "running"):
        store.finish(job_id, "interrupted", f"{job.restart_note or 'stopped'}; Slurm requeued it {job.restarts} "
                     f"times, the most --max-requeues allows ({cap}): resume continues it")
    print(f"job {job_id}: not started: --max-requeues {cap} reached", flush=True)
    return False


def _slurm_options(job_id: str) -> RequeuePolicy:
    from dlguide_core.jobs.executors.base import load_options
    from dlguide_core.jobs.executors.slurm_stop import RequeuePolicy

    return load_options(job_id, RequeuePolicy)  # SlurmOptions' fields, saved by the submit


def _settle(store: JobStore, job_id: str, status: str, signalled: bool) -> str:
    """After torchrun's ranks recorded their ending: the Slurm stop judged here (see _decide)."""
    error = store.get(job_id, refresh=False).error
    decided, reason = _decide(store, job_id, status, error, signalled=signalled)
    if decided not in (status, "queued"):
        store.finish(job_id, decided, reason)
    return decided


def _decide(store: JobStore, job_id: str, status: str, error: str | None,
            signalled: bool = True) -> tuple[str, str | None]:
    """A Slurm job that stopped (cancelled or interrupted): who stopped it, decided here once (slurm_stop), before
    its ending is written. "queued": Slurm runs the same job again (the store already says so). `signalled`:
    False when no stop signal reached the job (its processes failed: a rank killed, a peer lost)."""
    from dlguide_core.jobs.executors import slurm_commands, slurm_stop

    external = slurm_stop.slurm_job_id()
    job = store.get(job_id, refresh=False)
    if status not in ("cancelled", "interrupted") or not external or job.external_id != external:
        return status, error
    options, fields = _slurm_options(job_id), _fields(external)
    cause = _last_run_cause(job_id, external, fields)
    cancel_flag = store.cancel_requested(job_id)
    verdict = slurm_stop.judge(fields, cancel_flag=cancel_flag, step=job.checkpoint_step,
                               restart=slurm_stop.restart_count(), requeue=options.requeue,
                               requeue_on_timeout=options.requeue_on_timeout, time_limit=options.time, cause=cause,
                               signalled=signalled)
    if verdict.status == "queued" and job.restarts >= options.max_requeues:
        verdict = slurm_stop.SlurmStop("interrupted", f"{verdict.reason}; Slurm requeued it {job.restarts} times, "
                                       f"the most --max-requeues allows ({options.max_requeues}): resume continues it")
    if verdict.status != "queued":
        return verdict.status, None if cancel_flag else verdict.reason
    if not store.requeued(job_id, verdict.reason, os.getpid()):
        if store.get(job_id, refresh=False).pid != os.getpid():  # Slurm's next run has it already: leave it be
            return "queued", verdict.reason
        return "cancelled", None  # a cancel came meanwhile
    if verdict.requeue_self:
        try:
            slurm_commands.requeue(external)
        except Exception as exc:  # noqa: BLE001 - any failure: the job stays resumable by hand, saying why
            return "interrupted", f"{verdict.reason}; scontrol requeue failed ({exc}): resume continues it"
    print(f"job {job_id}: {verdict.reason}; Slurm runs it again (requeue)", flush=True)
    return "queued", verdict.reason


def _last_run_cause(job_id: str, external: str, fields: dict[str, str]) -> str | None:
    """slurm_stop.stepd_cause of the last run's part of the job's output (`fields`: scontrol's, naming the file,
    which Slurm appends to across requeues; the part after the last run's "running in process" line)."""
    from dlguide_core.jobs.executors import slurm_stop

    tail = _tail(Path(fields.get("StdOut", "")))
    return slurm_stop.stepd_cause(tail.rpartition(f"job {job_id} running in process")[2], external)


def _tail(path: Path, size: int = 16384) -> str:
    if not path.name:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - size))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _fields(external: str) -> dict[str, str]:
    from dlguide_core.jobs.executors import slurm_commands

    try:
        return slurm_commands.job_fields(external)
    except Exception:  # noqa: BLE001 - Slurm not answering: the stop stays interrupted (resumable)
        return {}


def _run_inline(store: JobStore, job_id: str, early: _EarlySignal) -> str:
    from dlguide_core.jobs.runner import run_job
    from dlguide_core.training.sinks import ConsoleSink, NullSink, TeeSink

    class _Early(NullSink):
        def should_stop(self) -> bool:
            return early.seen is not None

    return run_job(store, job_id, TeeSink(ConsoleSink(every=50, stream=sys.stdout), _Early()),
                   decide=lambda status, error: _decide(store, job_id, status, error))


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
