"""The durable job store (SQLite in WAL mode under DLGUIDE_HOME) and the job queue.

Writers: the job process (through StoreSink) and whoever submits, cancels or resumes.
Readers: the Train page, the CLI, other tools; any number of processes at once (WAL).
A job whose process died without saying so is marked `interrupted` whenever the
store is read (`refresh`), with the reason when it can be known.

Lifecycle: queued -> running -> succeeded | failed | cancelled | interrupted;
cancelled, interrupted and failed jobs can be resumed (-> queued) from their checkpoint.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from dlguide_core import settings
from dlguide_core.errors import DlguideError
from dlguide_core.training.sinks import NullSink

STATUSES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")
ACTIVE = ("queued", "running")
RESUMABLE = ("cancelled", "interrupted", "failed")
STEP_COLUMNS = ("step", "epoch", "loss", "lr", "images_per_s", "time")
# Optional per-step metrics kept in the extra JSON column: (column, JSON key, scale). TensorFlow jobs
# record Keras' running training accuracy of the epoch so far as a fraction; it is read in percent,
# like top1/top5 everywhere else in the store.
STEP_EXTRAS = (("accuracy", "accuracy", 100.0),)
EPOCH_COLUMNS = ("epoch", "train_loss", "val_loss", "top1", "top5", "time")
LAUNCH_GRACE_S = 120.0  # a claimed job whose process never registered is given up after this

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, recipe TEXT NOT NULL, framework TEXT NOT NULL, config TEXT NOT NULL,
    status TEXT NOT NULL, pid INTEGER, pid_started REAL, slot INTEGER,
    created REAL NOT NULL, started REAL, finished REAL, error TEXT,
    checkpoint TEXT, checkpoint_step INTEGER, checkpoint_epoch INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0, total_steps INTEGER, epochs INTEGER,
    class_names TEXT, attempts INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS steps (
    job_id TEXT NOT NULL, step INTEGER NOT NULL, epoch INTEGER NOT NULL, loss REAL, lr REAL,
    images_per_s REAL, time REAL NOT NULL, extra TEXT, PRIMARY KEY (job_id, step)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS epochs (
    job_id TEXT NOT NULL, epoch INTEGER NOT NULL, train_loss REAL, val_loss REAL, top1 REAL, top5 REAL,
    time REAL NOT NULL, extra TEXT, PRIMARY KEY (job_id, epoch)) WITHOUT ROWID;
"""


class JobError(DlguideError):
    """An unknown job, or an action its status does not allow."""


@dataclass(frozen=True)
class Job:
    id: str
    recipe: str
    framework: str
    config: dict[str, Any]
    status: str
    pid: int | None
    slot: int | None
    created: float
    started: float | None
    finished: float | None
    error: str | None
    checkpoint: str | None
    checkpoint_step: int | None
    total_steps: int | None
    epochs: int | None
    class_names: tuple[str, ...]
    cancel_requested: bool
    attempts: int

    @property
    def job_dir(self) -> Path:
        return job_dir(self.id)

    @property
    def log_path(self) -> Path:
        return self.job_dir / "job.log"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["class_names"] = list(self.class_names)
        return data


def devices_of(config: str | dict[str, Any] | None) -> int:
    """Devices a job occupies on this machine: its processes per node (1 for a plain or TF job)."""
    data = json.loads(config) if isinstance(config, str) else (config or {})
    try:
        return max(int(data.get("nproc_per_node", 1)), 1)
    except (TypeError, ValueError):
        return 1


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def job_dir(job_id: str) -> Path:
    return settings.home() / "jobs" / job_id


def _row_to_job(row: sqlite3.Row) -> Job:
    return Job(id=row["id"], recipe=row["recipe"], framework=row["framework"], config=json.loads(row["config"]),
               status=row["status"], pid=row["pid"], slot=row["slot"], created=row["created"],
               started=row["started"], finished=row["finished"], error=row["error"], checkpoint=row["checkpoint"],
               checkpoint_step=row["checkpoint_step"], total_steps=row["total_steps"], epochs=row["epochs"],
               class_names=tuple(json.loads(row["class_names"] or "[]")),
               cancel_requested=bool(row["cancel_requested"]), attempts=row["attempts"])


class JobStore:
    """One SQLite database; safe to use from several threads (one lock) and processes (WAL)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else settings.home() / "jobs.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes
        self._conn.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")  # take the write lock up front: no upgrade deadlocks
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _rows(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    # ---------------------------------------------------------------- jobs

    def create(self, recipe: str, framework: str, config: dict[str, Any]) -> Job:
        job_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"  # ids made in one second stay apart
        with self._tx() as db:
            db.execute("INSERT INTO jobs (id, recipe, framework, config, status, created) VALUES (?,?,?,?,?,?)",
                       (job_id, recipe, framework, json.dumps(config), "queued", time.time()))
        job_dir(job_id).mkdir(parents=True, exist_ok=True)
        return self.get(job_id, refresh=False)

    def get(self, job_id: str, refresh: bool = True) -> Job:
        if refresh:
            self.refresh()
        rows = self._rows("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if not rows:
            raise JobError(f"no job {job_id!r} in {self.path}")
        return _row_to_job(rows[0])

    def list_jobs(self, refresh: bool = True) -> list[Job]:
        """Every job, newest first."""
        if refresh:
            self.refresh()
        return [_row_to_job(r) for r in self._rows("SELECT * FROM jobs ORDER BY created DESC, id DESC")]

    def refresh(self) -> list[str]:
        """Mark running jobs whose process is gone as interrupted; returns their ids."""
        gone = []
        for row in self._rows("SELECT id, pid, pid_started, started FROM jobs WHERE status = 'running'"):
            reason = _death_reason(row["id"], row["pid"], row["pid_started"], row["started"])
            if reason and self._set_status(row["id"], "interrupted", reason, only_if="running"):
                gone.append(row["id"])
        return gone

    def _set_status(self, job_id: str, status: str, error: str | None, only_if: str | None = None) -> bool:
        sql = "UPDATE jobs SET status = ?, error = ?, finished = ? WHERE id = ?"
        args: tuple = (status, error, time.time() if status not in ACTIVE else None, job_id)
        if only_if:
            sql, args = sql + " AND status = ?", (*args, only_if)
        with self._tx() as db:
            return db.execute(sql, args).rowcount == 1

    def claim_next(self, max_running: int | Callable[[], int]) -> Job | None:
        """Atomically move the oldest queued job to running if its devices fit in `max_running`.

        Each job counts as the devices it uses (`devices_of`: a torchrun job's processes per
        node), so an 8-GPU job fills an 8-GPU machine. Strictly first in, first out: a job that
        does not fit yet waits and nothing overtakes it; a job bigger than the machine still
        runs alone (torchrun then says what is missing). `max_running` may be a function, asked only
        when something runs (counting GPUs imports torch, which `jobs list` should not wait for)."""
        with self._tx() as db:
            running = db.execute("SELECT slot, config FROM jobs WHERE status = 'running'").fetchall()
            row = db.execute("SELECT id, config FROM jobs WHERE status = 'queued' ORDER BY created, id "
                             "LIMIT 1").fetchone()
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
        with self._tx() as db:
            done = db.execute("UPDATE jobs SET status = 'running', slot = 0, started = ?, error = NULL, "
                              "attempts = attempts + 1 WHERE id = ? AND status = 'queued'", (time.time(), job_id))
            if done.rowcount != 1:
                raise JobError(f"job {job_id} is not queued")
        self.set_pid(job_id, pid)
        return self.get(job_id, refresh=False)

    def set_pid(self, job_id: str, pid: int) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET pid = ?, pid_started = ? WHERE id = ?", (pid, _process_start(pid), job_id))

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
            with self._tx() as db:
                db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
        else:
            raise JobError(f"job {job_id} is {job.status}; only queued or running jobs can be cancelled")
        return self.get(job_id, refresh=False)

    def cancel_requested(self, job_id: str) -> bool:
        rows = self._rows("SELECT cancel_requested FROM jobs WHERE id = ?", (job_id,))
        return bool(rows and rows[0][0])

    def set_plan(self, job_id: str, total_steps: int | None, epochs: int, class_names: tuple[str, ...]) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET total_steps = ?, epochs = ?, class_names = ? WHERE id = ?",
                       (total_steps, epochs, json.dumps(list(class_names)), job_id))

    def set_checkpoint(self, job_id: str, path: Path, step: int | None, epoch: int | None) -> None:
        with self._tx() as db:
            db.execute("UPDATE jobs SET checkpoint = ?, checkpoint_step = ?, checkpoint_epoch = ? WHERE id = ?",
                       (str(path), step, epoch, job_id))

    def prepare_resume(self, job_id: str) -> Job:
        """Back to queued. Metrics past the checkpoint stay until the resumed run starts and trims
        them to the position it actually restored (StoreSink.on_start -> trim_metrics)."""
        job = self.get(job_id)
        if job.status not in RESUMABLE:
            raise JobError(f"job {job_id} is {job.status}; only {', '.join(RESUMABLE)} jobs can be resumed")
        with self._tx() as db:
            db.execute("UPDATE jobs SET status = 'queued', cancel_requested = 0, error = NULL, finished = NULL "
                       "WHERE id = ?", (job_id,))
        return self.get(job_id, refresh=False)

    def trim_metrics(self, job_id: str, step: int, epoch: int) -> None:
        """Drop steps after `step` and epochs from `epoch` on: a run starting there redoes them."""
        with self._tx() as db:
            db.execute("DELETE FROM steps WHERE job_id = ? AND step > ?", (job_id, step))
            db.execute("DELETE FROM epochs WHERE job_id = ? AND epoch >= ?", (job_id, epoch))

    def delete(self, job_id: str) -> None:
        """Forget a finished job and remove its folder (checkpoint and log included)."""
        job = self.get(job_id)
        if job.status in ACTIVE:
            raise JobError(f"job {job_id} is {job.status}; cancel it before deleting")
        with self._tx() as db:
            for table, key in (("steps", "job_id"), ("epochs", "job_id"), ("jobs", "id")):
                db.execute(f"DELETE FROM {table} WHERE {key} = ?", (job_id,))
        shutil.rmtree(job_dir(job_id), ignore_errors=True)

    # ---------------------------------------------------------------- metrics

    def add_steps(self, rows: list[tuple]) -> None:
        """Rows of (job_id, step, epoch, loss, lr, images_per_s, time, extra_json), one transaction."""
        if rows:
            with self._tx() as db:
                db.executemany("INSERT OR REPLACE INTO steps VALUES (?,?,?,?,?,?,?,?)", rows)

    def add_epoch(self, job_id: str, epoch: int, metrics: dict[str, Any]) -> None:
        known = {k: metrics.get(k) for k in ("train_loss", "val_loss", "top1", "top5")}
        extra = {k: v for k, v in metrics.items() if k not in known}
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO epochs VALUES (?,?,?,?,?,?,?,?)",
                       (job_id, epoch, *known.values(), time.time(), json.dumps(extra, default=str)))

    def steps(self, job_id: str, after: int = 0, *, extras: bool = True) -> dict[str, list]:
        """Per-step metrics after step `after`, as columns: STEP_COLUMNS, then (with `extras`) the
        STEP_EXTRAS columns, None where a recipe does not record one."""
        rows = self._rows(f"SELECT {', '.join(STEP_COLUMNS)}, extra FROM steps WHERE job_id = ? AND step > ? "
                          "ORDER BY step", (job_id, after))
        cols = {name: [r[i] for r in rows] for i, name in enumerate(STEP_COLUMNS)}
        if extras:
            parsed = [json.loads(r["extra"]) if r["extra"] else {} for r in rows]  # json, not SQL: NaN is allowed
            for name, key, scale in STEP_EXTRAS:
                cols[name] = [None if (v := _finite(e.get(key))) is None else v * scale for e in parsed]
        return cols

    def has_step(self, job_id: str, step: int, at: float) -> bool:
        """Whether step `step` is still the row written at time `at` (a reader's cache is current):
        false once a resumed run has trimmed it, or redone it."""
        rows = self._rows("SELECT time FROM steps WHERE job_id = ? AND step = ?", (job_id, step))
        return bool(rows) and rows[0][0] == at

    def last_step(self, job_id: str) -> dict[str, Any] | None:
        rows = self._rows(f"SELECT {', '.join(STEP_COLUMNS)} FROM steps WHERE job_id = ? ORDER BY step DESC LIMIT 1",
                          (job_id,))
        return dict(rows[0]) if rows else None

    def recent_steps(self, job_id: str, count: int = 20) -> list[dict[str, Any]]:
        rows = self._rows(f"SELECT {', '.join(STEP_COLUMNS)} FROM steps WHERE job_id = ? ORDER BY step DESC "
                          "LIMIT ?", (job_id, count))
        return [dict(r) for r in reversed(rows)]

    def per_class_accuracy(self, job_id: str) -> dict[str, float]:
        """Top-1 (percent) per class at the last evaluated epoch, as cifar_net's guide prints at the end;
        {} when no epoch recorded it (TensorFlow recipes, or none finished yet)."""
        rows = self._rows("SELECT extra FROM epochs WHERE job_id = ? ORDER BY epoch DESC LIMIT 1", (job_id,))
        extra = json.loads(rows[0]["extra"] or "{}") if rows else {}
        per_class = extra.get("per_class")
        return dict(per_class) if isinstance(per_class, dict) else {}

    def epochs(self, job_id: str) -> list[dict[str, Any]]:
        rows = self._rows(f"SELECT {', '.join(EPOCH_COLUMNS)}, extra FROM epochs WHERE job_id = ? ORDER BY epoch",
                          (job_id,))
        return [{**{k: r[k] for k in EPOCH_COLUMNS}, **json.loads(r["extra"] or "{}")} for r in rows]

    def export_csv(self, job_id: str) -> str:
        """Per-step rows joined with the metrics of the epoch each step belongs to."""
        self.get(job_id, refresh=False)
        by_epoch = {e["epoch"]: e for e in self.epochs(job_id)}
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow([*STEP_COLUMNS, "train_loss", "val_loss", "top1", "top5", *(e[0] for e in STEP_EXTRAS)])
        cols = self.steps(job_id)
        for i in range(len(cols["step"])):
            epoch = by_epoch.get(cols["epoch"][i], {})
            writer.writerow([cols[c][i] for c in STEP_COLUMNS] +
                            [epoch.get(k, "") for k in ("train_loss", "val_loss", "top1", "top5")] +
                            ["" if cols[c][i] is None else cols[c][i] for c, _, _ in STEP_EXTRAS])
        return out.getvalue()

    def summary(self, job: Job) -> dict[str, Any]:
        """One job-table row: progress, recent images/s and an ETA from the recent step rate."""
        recent = self.recent_steps(job.id, 21)
        last = recent[-1] if recent else None
        ips = sum(r["images_per_s"] for r in recent) / len(recent) if recent else None
        eta = None
        if job.status == "running" and len(recent) > 1 and job.total_steps:
            per_step = (recent[-1]["time"] - recent[0]["time"]) / (recent[-1]["step"] - recent[0]["step"])
            eta = max(job.total_steps - recent[-1]["step"], 0) * per_step
        return {"id": job.id, "recipe": job.recipe, "status": job.status,
                "epoch": None if last is None else last["epoch"], "step": None if last is None else last["step"],
                "total_steps": job.total_steps, "images_per_s": ips, "eta_s": eta, "error": job.error}


# -------------------------------------------------------------------- process liveness


def _process_start(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _death_reason(job_id: str, pid: int | None, pid_started: float | None, started: float | None) -> str | None:
    """None while the job's process lives; otherwise why we think it is gone."""
    if pid is None:
        if started and time.time() - started > LAUNCH_GRACE_S:
            return "the job process never started (see its log)"
        return None
    reason = _reap(pid) or _gone(pid, pid_started, started)
    if reason is None:
        return None
    tail = _log_tail(job_dir(job_id) / "job.log")
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


def torchrun_root_cause(lines: list[str]) -> str | None:
    """From torchrun's failure summary ("Root Cause (first observed failure): ... rank : 1 ...
    exitcode : -9 (pid: 4144) (SIGKILL)"), e.g. "rank 1 (local_rank: 1) exitcode -9 (pid: 4144) (SIGKILL)"."""
    try:
        start = max(i for i, line in enumerate(lines) if line.startswith("Root Cause"))
    except ValueError:
        return None
    fields = {}
    for line in lines[start + 1:]:
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("rank", "exitcode"):
            fields[key.strip()] = value.strip()
    if "rank" not in fields:
        return None
    return f"rank {fields['rank']}" + (f" exitcode {fields['exitcode']}" if "exitcode" in fields else "")


# -------------------------------------------------------------------- the job process's sink


class StoreSink(NullSink):
    """Streams a running job's metrics into the store without slowing the loop.

    `on_step` only appends to a deque; a writer thread commits the batch every
    `flush_s` (one transaction, so a reader sees a step within about flush_s) and
    polls the cancel flag, which `should_stop` then reads from memory.
    """

    def __init__(self, store_path: Path, job_id: str, flush_s: float = 0.25) -> None:
        self.job_id, self.flush_s = job_id, flush_s
        self.store = JobStore(store_path)  # this thread's connection (epochs, checkpoints)
        self._pending: deque[tuple] = deque()
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._closing = threading.Event()
        self.stop_reason: str | None = None
        self._writer = threading.Thread(target=self._write_loop, args=(store_path,), name="dlguide-store-sink",
                                        daemon=True)
        self._writer.start()

    def on_start(self, *, total_steps: int | None, epochs: int, class_names: tuple[str, ...] = (),
                 start_step: int | None = None, start_epoch: int | None = None) -> None:
        # Trim here, in the process that restored the checkpoint: the store's checkpoint record can
        # lag the file by one save (a kill between the file's rename and the record's update).
        if start_step is not None and start_epoch is not None:
            self.store.trim_metrics(self.job_id, start_step, start_epoch)
        self.store.set_plan(self.job_id, total_steps, epochs, class_names)

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        self._pending.append((self.job_id, step, epoch, loss, lr, images_per_s, time.time(),
                              json.dumps(extra) if extra else None))

    def on_epoch(self, epoch: int, metrics: dict[str, Any]) -> None:
        self.flush_now()
        self.store.add_epoch(self.job_id, epoch, metrics)

    def flush(self) -> None:
        self.flush_now()

    def on_checkpoint(self, path: Path, *, step: int | None = None, epoch: int | None = None) -> None:
        self.flush_now()
        self.store.set_checkpoint(self.job_id, path, step, epoch)

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, reason: str | None = None) -> None:
        """From a signal handler or the cancel poll: the loop checkpoints and returns."""
        self.stop_reason = self.stop_reason or reason
        self._stop.set()

    def flush_now(self, store: JobStore | None = None) -> None:
        # One lock over pop + commit: when the loop's flush() returns, rows the writer thread
        # had already taken are committed too, not still in flight.
        with self._flush_lock:
            rows = []
            while self._pending:
                rows.append(self._pending.popleft())
            (store or self.store).add_steps(rows)

    def close(self) -> None:
        self._closing.set()
        self._writer.join(timeout=30)
        self.flush_now()
        self.store.close()

    def _write_loop(self, store_path: Path) -> None:
        store = JobStore(store_path)
        try:
            while not self._closing.wait(self.flush_s):
                self.flush_now(store)
                if not self._stop.is_set() and store.cancel_requested(self.job_id):
                    self.request_stop("cancel")
        finally:
            store.close()


# -------------------------------------------------------------------- the queue


def max_jobs_setting() -> int | None:
    """DLGUIDE_MAX_JOBS when it is a positive integer, else None."""
    raw = os.environ.get("DLGUIDE_MAX_JOBS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def max_concurrent() -> int:
    """Devices the queue may fill at once (see claim_next: a job counts as its devices):
    DLGUIDE_MAX_JOBS, else the GPUs PyTorch sees, 1 on a CPU-only machine."""
    if (setting := max_jobs_setting()) is not None:
        return setting
    import torch

    return max(1, torch.cuda.device_count() if torch.cuda.is_available() else 1)


def submit(store: JobStore, recipe: str, config: Any, *, start: bool = True) -> Job:
    """Queue a job for `config` (a recipe config dataclass) and start it if a slot is free."""
    from dlguide_core.jobs.catalog import get_recipe

    found = get_recipe(recipe)
    if not isinstance(config, found.config_cls):
        raise JobError(f"{recipe} takes a {found.config_cls.__name__}, not {type(config).__name__}")
    if found.framework == "pytorch":
        from dlguide_core.training import distributed

        # before it is queued, not when it runs (an evaluation job has no SyncBatchNorm)
        distributed.check_devices(config.device, getattr(config, "sync_batchnorm", False))
    job = store.create(recipe, found.framework, asdict(config))
    if start:
        dispatch(store)
    return store.get(job.id, refresh=False)


def dispatch(store: JobStore, max_running: Callable[[], int] = max_concurrent) -> list[str]:
    """Start queued jobs while fewer than `max_running()` devices are busy; returns the ids started.
    `max_running` is asked at most once, and only when a queued job would start beside running ones."""
    store.refresh()
    started = []
    limit = lru_cache(maxsize=1)(max_running)
    while (job := store.claim_next(limit)) is not None:
        try:
            launch(store, job)
        except (DlguideError, OSError) as exc:  # no process: fail now instead of holding its slots until refresh
            store.finish(job.id, "failed", f"could not start: {exc}")
            continue
        started.append(job.id)
    return started


def launch(store: JobStore, job: Job) -> int:
    """Start the job's own process, detached (new session) so it outlives the app and the tab."""
    folder = job_dir(job.id)
    folder.mkdir(parents=True, exist_ok=True)
    env = job_env(job, os.environ)
    with open(folder / "job.log", "ab") as log:
        proc = subprocess.Popen(job_command(job),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=Path(__file__).resolve().parents[2], env=env)
    store.set_pid(job.id, proc.pid)
    return proc.pid


def job_env(job: Job, environ: Mapping[str, str]) -> dict[str, str]:
    """The job process's environment: its store, its block of GPUs, and its slot among the GPUs it sees
    (gpu_slots.gpu_index: 0 when pinned to its block, else the queue's slot)."""
    from dlguide_core.gpu_slots import GPU_SLOT_ENV

    env = {**environ, "DLGUIDE_HOME": str(settings.home())}
    pinned = visible_devices_env(job.slot or 0, devices_of(job.config), env)
    env.update(pinned)
    env[GPU_SLOT_ENV] = "0" if pinned else str(job.slot or 0)
    return env


def visible_devices_env(slot: int, need: int, env: dict[str, str]) -> dict[str, str]:
    """Pin a multi-device job to its block of GPUs [slot, slot + need).

    torchrun's workers pick cuda:LOCAL_RANK, so without this two 4-GPU jobs on one 8-GPU
    machine would both land on GPUs 0-3. Single-device jobs use cuda:slot and need nothing.
    An existing CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES list is respected and sliced."""
    if need <= 1:
        return {}
    pinned = {}
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        current = [d for d in env.get(var, "").split(",") if d.strip()]
        pool = current or [str(i) for i in range(slot + need)]
        block = pool[slot:slot + need]
        if len(block) == need:
            pinned[var] = ",".join(block)
    return pinned


def job_command(job: Job) -> list[str]:
    """The job process: the job runner, or torchrun's agent over N of them for a distributed job (issue 6)."""
    if job.framework == "pytorch":
        from dlguide_core.jobs import launch  # torch-free: `jobs list` launches queued jobs without importing torch

        spec = launch.launch_spec_from_config(job.config)
        if spec.uses_torchrun:
            return launch.torchrun_command(spec, job.id)
    return [sys.executable, "-m", "dlguide_core.jobs.runner", job.id]


def resume(store: JobStore, job_id: str, *, start: bool = True) -> Job:
    job = store.prepare_resume(job_id)
    if start:
        dispatch(store)
    return store.get(job.id, refresh=False)
