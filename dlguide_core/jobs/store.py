"""The durable job store (SQLite in WAL mode under DLGUIDE_HOME, or PostgreSQL): the jobs and their statuses.

Writers: the job process (through StoreSink) and whoever submits, cancels or resumes (jobs.queue).
Readers: the Train page, the CLI, other tools; any number of processes at once (WAL, or the server).
A job whose process died without saying so is marked `interrupted` whenever the
store is read (`refresh`), with the reason when it can be known (jobs.liveness).
JobStore is composed, not inherited: it holds the connection (`db`: jobs.database, over jobs.dialect and
jobs.schema), each job's metrics in the same database (`metrics`: jobs.metric_tables) and a scheduler's
restarts of its own jobs (`requeues`: jobs.requeues), and offers their methods under their own names, so a
client knows one store. The job record itself is jobs.job.
"""

from __future__ import annotations

import json
import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dlguide_core import settings
from dlguide_core.jobs import liveness
from dlguide_core.jobs.database import Database
from dlguide_core.jobs.identity import qualified
from dlguide_core.jobs.job import (  # noqa: F401  (the store's record types, imported from here by clients)
    ACTIVE,
    RESUMABLE,
    STATUSES,
    Job,
    JobError,
    JobSummary,
    UnreadableJob,
    devices_of,
    job_dir,
    log_path,
    row_to_job,
)
from dlguide_core.jobs.metric_tables import EpochMetrics, EpochRow, MetricTables, StepRow
from dlguide_core.jobs.requeues import SchedulerRestarts
from dlguide_core.jobs.store_url import DB_FILE, StoreUrl


def _is_json_object(text: str | None) -> bool:
    try:
        return isinstance(json.loads(text or ""), dict)
    except ValueError:
        return False


def db_path(home: Path | None = None) -> Path:
    """The SQLite job store's file in `home` (default: DLGUIDE_HOME), used when DLGUIDE_STORE_URL is unset."""
    return (home or settings.home()) / DB_FILE


def open_store(url: str | Path | StoreUrl | None = None, *, upgrade: bool = False) -> JobStore:
    """The job store: the one way every client (app, CLI, job processes, exports) opens it.
    `url` defaults to DLGUIDE_STORE_URL (jobs.store_url); `upgrade` lets a PostgreSQL store migrate."""
    return JobStore(url, upgrade=upgrade)


class JobStore:
    """One store (see open_store); safe to use from several threads (one lock) and processes."""

    def __init__(self, url: str | Path | StoreUrl | None = None, *, upgrade: bool = False) -> None:
        self.db = Database(url, upgrade=upgrade)
        self.metrics = MetricTables(self.db)
        self.requeues = SchedulerRestarts(self.db, lambda job_id: self.get(job_id, refresh=False))

    # The connection (jobs.database)
    @property
    def url(self) -> StoreUrl:
        return self.db.url

    @property
    def path(self) -> Path | None:
        """The SQLite file; None on a server."""
        return self.db.path

    @property
    def schema_version(self) -> int:
        return self.db.schema_version

    @property
    def backend(self) -> str:
        return self.db.backend

    @property
    def read_only(self) -> bool:
        return self.db.read_only

    def close(self) -> None:
        self.db.close()

    # Each job's metrics (jobs.metric_tables)
    def add_steps(self, rows: list[tuple]) -> None:
        self.metrics.add_steps(rows)

    def add_epoch(self, job_id: str, epoch: int, metrics: EpochMetrics) -> None:
        self.metrics.add_epoch(job_id, epoch, metrics)

    def trim_metrics(self, job_id: str, step: int, epoch: int) -> None:
        self.metrics.trim_metrics(job_id, step, epoch)

    def steps(self, job_id: str, after: int = 0, *, extras: bool = True) -> dict[str, list]:
        return self.metrics.steps(job_id, after, extras=extras)

    def has_step(self, job_id: str, step: int, at: float) -> bool:
        return self.metrics.has_step(job_id, step, at)

    def last_step(self, job_id: str) -> StepRow | None:
        return self.metrics.last_step(job_id)

    def recent_steps(self, job_id: str, count: int = 20) -> list[StepRow]:
        return self.metrics.recent_steps(job_id, count)

    def per_class_accuracy(self, job_id: str) -> dict[str, float]:
        return self.metrics.per_class_accuracy(job_id)

    def epochs(self, job_id: str) -> list[EpochRow]:
        return self.metrics.epochs(job_id)

    def metrics_csv(self, job_id: str) -> str:
        return self.metrics.metrics_csv(job_id)

    # A scheduler's restarts of its own jobs (jobs.requeues)
    def requeued(self, job_id: str, note: str, pid: int | None = None) -> bool:
        return self.requeues.requeued(job_id, note, pid)

    def take_back(self, job_id: str, pid: int, external_id: str, unseen: str | None = None) -> Job:
        return self.requeues.take_back(job_id, pid, external_id, unseen)

    # The jobs themselves

    def create(self, recipe: str, framework: str, config: dict[str, Any], *, owner: str | None = None,
               executor: str = "local", name: str | None = None, tags: Sequence[str] = (),
               claim_pid: int | None = None) -> Job:
        """A new queued job; with `claim_pid`, created running in that process (a foreground run:
        one transaction, so no dispatcher can claim it in between)."""
        job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"  # ids made in one second stay apart
        with self.db.transaction() as db:
            db.execute("INSERT INTO jobs (id, recipe, framework, config, status, created, owner, executor, name, "
                       "tags) VALUES (?,?,?,?,?,?,?,?,?,?)", (job_id, recipe, framework, json.dumps(config),
                                                             "queued", time.time(),
                                                             qualified(owner) if owner else None, executor, name,
                                                             json.dumps(list(tags))))
            if claim_pid is not None:
                self._claim_in(db, job_id, claim_pid)
        job_dir(job_id).mkdir(parents=True, exist_ok=True)
        return self.get(job_id, refresh=False)

    def get(self, job_id: str, refresh: bool = True, *, lenient: bool = False) -> Job:
        """One job; UnreadableJob when its row is damaged (`lenient`: its damaged JSON read as empty, to delete it)."""
        if refresh:
            self.refresh()
        rows = self.db.rows("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if not rows:
            raise JobError(f"no job {job_id!r} in {self.url.masked}")
        return row_to_job(rows[0], lenient=lenient)

    def list_jobs(self, refresh: bool = True) -> list[Job]:
        """Every job, newest first."""
        if refresh:
            self.refresh()
        return self._readable(self.db.rows("SELECT * FROM jobs ORDER BY created DESC, id DESC"))[0]

    def unreadable_jobs(self) -> list[str]:
        """One line per job whose row cannot be read (list_jobs leaves them out): for a warning beside the list."""
        return self._readable(self.db.rows("SELECT * FROM jobs ORDER BY created DESC, id DESC"))[1]

    @staticmethod
    def _readable(rows: Sequence[Any]) -> tuple[list[Job], list[str]]:
        jobs, unreadable = [], []
        for row in rows:
            try:
                jobs.append(row_to_job(row))
            except UnreadableJob as exc:  # one damaged row never hides the others
                unreadable.append(str(exc))
        return jobs, unreadable

    def refresh(self) -> list[str]:
        """Mark running jobs whose process is gone as interrupted; returns their ids (none on a
        read-only store, which is only read)."""
        gone: list[str] = []
        if self.read_only:
            return gone
        for row in self.db.rows("SELECT id, pid, pid_started, started, executor, host, boot_id FROM jobs "
                              "WHERE status = 'running'"):
            # A pid is checked only where it was taken (host, boot, PID namespace); a scheduler's job before its
            # process recorded where it runs is the scheduler's to judge (jobs.executors.tracking).
            local = (row["executor"] or "local") == "local"
            if row["host"] is None and not local:
                continue
            if liveness.can_judge(row["host"], row["boot_id"]):
                reason = liveness.death_reason(row["pid"], row["pid_started"], row["started"], log_path(row["id"]))
            elif local:  # not visible from here: ended only once it has been quiet for the bounded wait
                reason = liveness.unseen_reason(row["host"], row["boot_id"], job_dir(row["id"]), row["started"])
            else:
                continue
            if reason and self._set_status(row["id"], "interrupted", reason, only_if="running"):
                gone.append(row["id"])
        return gone

    def _set_status(self, job_id: str, status: str, error: str | None, only_if: str | None = None) -> bool:
        sql = "UPDATE jobs SET status = ?, error = ?, finished = ? WHERE id = ?"
        args: tuple = (status, error, time.time() if status not in ACTIVE else None, job_id)
        if only_if:
            sql, args = sql + " AND status = ?", (*args, only_if)
        with self.db.transaction() as db:
            return db.execute(sql, args).rowcount == 1

    def claim_next(self, max_running: int | Callable[[], int]) -> Job | None:
        """Atomically move the oldest queued job to running if its devices fit in `max_running`.

        Each job counts as the devices it uses (`devices_of`: a torchrun job's processes per
        node), so an 8-GPU job fills an 8-GPU machine. Strictly first in, first out: a job that
        does not fit yet waits and nothing overtakes it; a job bigger than the machine still
        runs alone (torchrun then says what is missing). `max_running` may be a function, asked only
        when something runs (counting GPUs imports torch, which `jobs list` should not wait for)."""
        if self.read_only:
            return None  # a read-only store is only read: nothing starts from it
        with self.db.transaction() as db:
            self.db.lock_claims(db)
            # This machine's queue: jobs of other executors run (and wait) on their scheduler, not here.
            running = db.execute("SELECT slot, config FROM jobs WHERE status = 'running' AND executor = 'local'"
                                 ).fetchall()
            row = db.execute("SELECT id, config FROM jobs WHERE status = 'queued' AND executor = 'local' "
                             "ORDER BY created, id LIMIT 1").fetchone()
            while row is not None and not _is_json_object(row["config"]):  # a damaged row fails, never blocks
                db.execute("UPDATE jobs SET status = 'failed', error = ?, finished = ? WHERE id = ?",
                           ("its config is not JSON: it cannot run", time.time(), row["id"]))
                row = db.execute("SELECT id, config FROM jobs WHERE status = 'queued' AND executor = 'local' "
                                 "ORDER BY created, id LIMIT 1").fetchone()
            if row is None:
                return None
            used = {(r["slot"] or 0) + i for r in running for i in range(devices_of(r["config"]))}
            need = devices_of(row["config"])
            limit = (max_running() if callable(max_running) else max_running) if running else need
            if running and len(used) + need > limit:
                return None
            # slot = the job's first device: the first free block of `need` slots, else the first free slot.
            blocks = (s for s in range(limit - need + 1) if used.isdisjoint(range(s, s + need)))
            slot = next(blocks, None)
            slot = slot if slot is not None else next(i for i in range(limit + len(used) + 1) if i not in used)
            db.execute("UPDATE jobs SET status = 'running', slot = ?, pid = NULL, started = ?, error = NULL, "
                       "attempts = attempts + 1 WHERE id = ?", (slot, time.time(), row["id"]))
        return self.get(row["id"], refresh=False)

    def claim(self, job_id: str, pid: int) -> Job:
        """Foreground runs: queued -> running in this process, outside the queue limit."""
        with self.db.transaction() as db:
            self._claim_in(db, job_id, pid)
        return self.get(job_id, refresh=False)

    def set_pid(self, job_id: str, pid: int) -> None:
        """The job's process: its pid and start time, and where that pid means something (host, boot id)."""
        host, boot_id = liveness.process_identity()
        self._update(job_id, pid=pid, pid_started=liveness.process_start(pid), host=host, boot_id=boot_id)

    def finish(self, job_id: str, status: str, error: str | None = None) -> None:
        if status not in STATUSES or status in ACTIVE:
            raise ValueError(f"not a final status: {status}")
        self._set_status(job_id, status, error)

    def request_cancel(self, job_id: str) -> Job:
        """A queued job is cancelled at once; a running one stops at its next step (with a checkpoint)."""
        job = self.get(job_id)
        if job.status == "queued":
            self._set_status(job_id, "cancelled", None, only_if="queued")
        elif job.status == "running":
            with self.db.transaction() as db:
                db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
        else:
            raise JobError(f"job {job_id} is {job.status}; only queued or running jobs can be cancelled")
        return self.get(job_id, refresh=False)

    def cancel_requested(self, job_id: str) -> bool:
        rows = self.db.rows("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,))
        return bool(rows and rows[0][0])

    def set_plan(self, job_id: str, total_steps: int | None, epochs: int, class_names: tuple[str, ...]) -> None:
        self._update(job_id, total_steps=total_steps, epochs=epochs, class_names=json.dumps(list(class_names)))

    def set_checkpoint(self, job_id: str, path: Path, step: int | None, epoch: int | None) -> None:
        self._update(job_id, checkpoint=str(path), checkpoint_step=step, checkpoint_epoch=epoch)

    def set_external(self, job_id: str, executor: str, external_id: str) -> None:
        """The scheduler running the job and the job's id there."""
        self._update(job_id, executor=executor, external_id=external_id)

    def set_host(self, job_id: str, host: str, boot_id: str | None) -> None:
        """The machine (and its boot) the job's process runs on."""
        self._update(job_id, host=host, boot_id=boot_id)

    def set_skipped_files(self, job_id: str, count: int, examples: Sequence[str]) -> None:
        """Inputs the job skipped as unreadable: how many, and a few of them."""
        self._update(job_id, skipped_files=json.dumps({"count": count, "examples": list(examples)}))

    def rename(self, job_id: str, name: str | None, tags: Sequence[str]) -> Job:
        self.get(job_id, refresh=False)  # an unknown job fails here
        self._update(job_id, name=name, tags=json.dumps(list(tags)))
        return self.get(job_id, refresh=False)

    def _update(self, job_id: str, **columns: Any) -> None:
        sets = ", ".join(f"{name} = ?" for name in columns)  # names from this module only, never from input
        with self.db.transaction() as db:
            db.execute(f"UPDATE jobs SET {sets} WHERE id = ?", (*columns.values(), job_id))

    def prepare_resume(self, job_id: str, *, claim_pid: int | None = None) -> Job:
        """Back to queued (with `claim_pid`: straight to running in that process, in the same
        transaction, as `create` does). Metrics past the checkpoint stay until the resumed run starts
        and trims them to the position it actually restored (StoreSink.on_start -> trim_metrics). A scheduler's
        id is dropped: it names the ended batch job, whose final state must not be read as the new run's."""
        job = self.get(job_id)
        if job.status not in RESUMABLE:
            raise JobError(f"job {job_id} is {job.status}; only {', '.join(RESUMABLE)} jobs can be resumed")
        with self.db.transaction() as db:
            db.execute("UPDATE jobs SET status = 'queued', cancel_requested = 0, error = NULL, finished = NULL, "
                       "external_id = NULL WHERE id = ?", (job_id,))
            if claim_pid is not None:
                self._claim_in(db, job_id, claim_pid)
        return self.get(job_id, refresh=False)

    @staticmethod
    def _claim_in(db: Any, job_id: str, pid: int) -> None:
        """queued -> running in process `pid` (slot 0, outside the queue's limit), inside transaction `db`."""
        host, boot_id = liveness.process_identity()  # where the pid means something
        done = db.execute("UPDATE jobs SET status = 'running', slot = 0, started = ?, error = NULL, pid = ?, "
                          "pid_started = ?, host = ?, boot_id = ?, attempts = attempts + 1 "
                          "WHERE id = ? AND status = 'queued'",
                          (time.time(), pid, liveness.process_start(pid), host, boot_id, job_id))
        if done.rowcount != 1:
            raise JobError(f"job {job_id} is not queued")

    def delete(self, job_id: str) -> None:
        """Forget a finished job and remove its folder (checkpoint and log included); a damaged row too."""
        job = self.get(job_id, lenient=True)
        if job.status in ACTIVE:
            raise JobError(f"job {job_id} is {job.status}; cancel it before deleting")
        with self.db.transaction() as db:
            for table, key in (("steps", "job_id"), ("epochs", "job_id"), ("jobs", "id")):
                db.execute(f"DELETE FROM {table} WHERE {key} = ?", (job_id,))
        shutil.rmtree(job_dir(job_id), ignore_errors=True)

    def export_csv(self, job_id: str) -> str:
        """Per-step rows joined with the metrics of the epoch each step belongs to (MetricTables.metrics_csv)."""
        self.get(job_id, refresh=False)  # an unknown job fails here, not as an empty CSV
        return self.metrics_csv(job_id)

    def summary(self, job: Job) -> JobSummary:
        """One job-table row: progress, recent images/s and an ETA from the recent step rate."""
        recent = self.recent_steps(job.id, 21)
        last = recent[-1] if recent else None
        ips = sum(r["images_per_s"] for r in recent) / len(recent) if recent else None
        eta = None
        if job.status == "running" and len(recent) > 1 and job.total_steps:
            per_step = (recent[-1]["time"] - recent[0]["time"]) / (recent[-1]["step"] - recent[0]["step"])
            eta = max(job.total_steps - recent[-1]["step"], 0) * per_step
        return JobSummary(job.id, job.recipe, job.status, epoch=None if last is None else last["epoch"],
                          step=None if last is None else last["step"], total_steps=job.total_steps,
                          images_per_s=ips, eta_s=eta, error=job.error)
