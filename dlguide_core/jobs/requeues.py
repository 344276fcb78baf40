"""A scheduler's restarts of its own jobs (Slurm's requeue, issue 32): the same dlguide job, run again.

A job that Slurm requeues (preemption, `scontrol requeue`, a failed node, a time limit with
--requeue-on-timeout) goes back to `queued` with its scheduler id kept (`requeued`), so a `jobs resume` is refused
meanwhile; Slurm's next run of the batch script takes it back (`take_back`) and one more restart is counted.
A part of JobStore (`store.requeues`, its methods offered under the same names): these are rows of the
`jobs` table like the rest of jobs.store, on the store's connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dlguide_core.jobs import liveness
from dlguide_core.jobs.database import Database
from dlguide_core.jobs.job import Job, JobError

# A scheduler's restart of its own job (JobStore.take_back); a restart the job did not see coming (its node died
# without a word) gets LOST_NOTE and the checkpoint step it resumes from.
LOST_NOTE = "stopped without a word (a lost node?) past checkpoint step "
TAKE_BACK_SQL = (
    "UPDATE jobs SET status = 'running', started = ?, error = NULL, finished = NULL, pid = ?, pid_started = ?, "
    "host = ?, boot_id = ?, attempts = attempts + 1, restarts = restarts + 1, restart_note = CASE WHEN status = "
    "'queued' AND restart_note IS NOT NULL THEN restart_note ELSE CAST(? AS TEXT) || "
    "CAST(coalesce(checkpoint_step, 0) AS TEXT) END WHERE id = ? AND external_id = ? AND status IN "
    "('queued', 'running', 'interrupted') AND cancel_requested = 0")


class SchedulerRestarts:
    """The requeues of the store's jobs, on its connection; `job(id)` reads a job back (JobStore.get)."""

    def __init__(self, db: Database, job: Callable[[str], Job]) -> None:
        self._db, self._job = db, job

    def requeued(self, job_id: str, note: str, pid: int | None = None) -> bool:
        """The scheduler runs this same job again (Slurm's requeue): back to queued, its scheduler id kept, so
        that the next run takes it over (`take_back`) and a `resume` is refused meanwhile. `note` says what stopped
        it ("preempted at step 120"). False when the job had already ended otherwise (a cancel won), or, with `pid`
        (the deciding run's process), when another run has the job now (Slurm's next run took it back first)."""
        owner, args = (" AND pid = ?", (note, job_id, pid)) if pid is not None else ("", (note, job_id))
        with self._db.transaction() as db:
            return db.execute("UPDATE jobs SET status = 'queued', error = NULL, finished = NULL, pid = NULL, "
                              "restart_note = ? WHERE id = ? AND status IN ('running', 'interrupted') "
                              "AND cancel_requested = 0" + owner, args).rowcount == 1

    def take_back(self, job_id: str, pid: int, external_id: str, unseen: str | None = None) -> Job:
        """A scheduler's restart of the job it already ran (same `external_id`): -> running in `pid`, one more
        restart counted. Taken from queued (a requeue the job saw coming), running or interrupted (a stop the
        previous run could not record: a node that died without a word, or a batch script killed before it
        judged; the scheduler runs a job id once at a time). `unseen`: that stop's note, the checkpoint's step
        to follow ("a node failed at step "), read back from the scheduler; LOST_NOTE when nothing says.
        JobError when the job is no longer this scheduler job's (resumed as a new one, cancelled, finished)."""
        host, boot_id = liveness.process_identity()
        args = (time.time(), pid, liveness.process_start(pid), host, boot_id, unseen or LOST_NOTE, job_id,
                external_id)
        with self._db.transaction() as db:
            done = db.execute(TAKE_BACK_SQL, args).rowcount == 1
        job = self._job(job_id)
        if not done:
            raise JobError(f"job {job_id} is {job.status}" + (
                "" if job.external_id == external_id else f" as scheduler job {job.external_id or '(none)'}"))
        return job
