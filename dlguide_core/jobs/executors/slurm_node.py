"""The Slurm executor's part in the job's own process on a node: `SlurmNode`, its `claim` and `judge_stop` hooks.

jobs.executors.job_entry runs every scheduler's job and names none: it asks the job's executor's hooks
(jobs.executors.node_hooks) to claim the job and, after a stop, to judge it. For Slurm, both read Slurm's view
here. Claim: when Slurm runs the job again (SLURM_RESTART_COUNT > 0) it is the same dlguide job, taken back
(`JobStore.take_back`, one more restart) and resumed from its checkpoint, up to --max-requeues. Judge: a user's
plain `scancel` is a cancel, a preemption or requeue sends the job back to queued for Slurm's next run of it
(jobs.executors.slurm_stop decides which, from `scontrol show job` and slurmstepd's line in this run's output).
"""

from __future__ import annotations

import os
from pathlib import Path

from dlguide_core.jobs.executors import slurm_commands, slurm_stop
from dlguide_core.jobs.executors.base import NodeHooks, load_options
from dlguide_core.jobs.executors.slurm_stop import RequeuePolicy
from dlguide_core.jobs.store import JobStore


class SlurmNode(NodeHooks):
    """A requeued job is the same dlguide job, taken back (`claim`); who stopped a run: the user, preemption, the
    time limit, a node (`judge_stop`, jobs.executors.slurm_stop)."""

    def claim(self, store: JobStore, job_id: str) -> bool:
        return claim(store, job_id)

    def judge_stop(self, store: JobStore, job_id: str, status: str, error: str | None,
                   signalled: bool = True) -> tuple[str, str | None]:
        return judge_stop(store, job_id, status, error, signalled)


def claim(store: JobStore, job_id: str) -> bool:
    """Take the job: a new run claims it (queued -> running); Slurm's rerun of it (a requeue) takes it back, or
    ends it interrupted past --max-requeues (False). JobError: cancelled while pending, or running elsewhere."""
    restart, external = slurm_stop.restart_count(), slurm_stop.slurm_job_id()
    if not (restart and external):
        store.claim(job_id, os.getpid())
        return True
    if not under_requeue_cap(store, job_id):
        return False
    job = store.take_back(job_id, os.getpid(), external, unseen_stop(job_id, external))
    print(f"job {job_id}: Slurm's restart {restart} ({job.restart_note}); resuming from checkpoint step "
          f"{job.checkpoint_step or 0}", flush=True)
    return True


def unseen_stop(job_id: str, external: str) -> str | None:
    """The note of the previous run's stop when that run could not record it (Slurm killed its batch script first,
    as a node failure's requeue can while the script still waits on srun): the cause in that run's part of the
    output (slurm_stop.unseen_stop_note), None when the output says nothing."""
    return slurm_stop.unseen_stop_note(last_run_cause(job_id, external, scontrol_fields(external)))


def under_requeue_cap(store: JobStore, job_id: str) -> bool:
    """False (and the job ended interrupted, saying why) once Slurm has requeued it --max-requeues times."""
    cap = requeue_policy(job_id).max_requeues
    job = store.get(job_id, refresh=False)
    if job.restarts < cap:
        return True
    if job.status in ("queued", "running"):
        store.finish(job_id, "interrupted", f"{job.restart_note or 'stopped'}; Slurm requeued it {job.restarts} "
                     f"times, the most --max-requeues allows ({cap}): resume continues it")
    print(f"job {job_id}: not started: --max-requeues {cap} reached", flush=True)
    return False


def requeue_policy(job_id: str) -> RequeuePolicy:
    return load_options(job_id, RequeuePolicy)  # SlurmOptions' fields, saved by the submit


def judge_stop(store: JobStore, job_id: str, status: str, error: str | None,
               signalled: bool = True) -> tuple[str, str | None]:
    """A Slurm job that stopped (cancelled or interrupted): who stopped it, decided here once (slurm_stop), before
    its ending is written. "queued": Slurm runs the same job again (the store already says so). `signalled`:
    False when no stop signal reached the job (its processes failed: a rank killed, a peer lost)."""
    external = slurm_stop.slurm_job_id()
    job = store.get(job_id, refresh=False)
    if status not in ("cancelled", "interrupted") or not external or job.external_id != external:
        return status, error
    options, fields = requeue_policy(job_id), scontrol_fields(external)
    cause = last_run_cause(job_id, external, fields)
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


def last_run_cause(job_id: str, external: str, fields: dict[str, str]) -> str | None:
    """slurm_stop.stepd_cause of the last run's part of the job's output (`fields`: scontrol's, naming the file,
    which Slurm appends to across requeues; the part after the last run's "running in process" line)."""
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


def scontrol_fields(external: str) -> dict[str, str]:
    try:
        return slurm_commands.job_fields(external)
    except Exception:  # noqa: BLE001 - Slurm not answering: the stop stays interrupted (resumable)
        return {}
