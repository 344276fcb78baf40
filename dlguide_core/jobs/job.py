"""A job as the store keeps it: the frozen `Job` record, its statuses and its folder.

Lifecycle: queued -> running -> succeeded | failed | cancelled | interrupted;
cancelled, interrupted and failed jobs can be resumed (-> queued) from their checkpoint.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dlguide_core import settings
from dlguide_core.errors import DlguideError
from dlguide_core.jobs.identity import qualified

STATUSES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")
ACTIVE = ("queued", "running")
RESUMABLE = ("cancelled", "interrupted", "failed")


def job_dir(job_id: str) -> Path:
    """A job's folder: its log, its checkpoint and whatever its recipe writes."""
    return settings.home() / "jobs" / job_id


def log_path(job_id: str) -> Path:
    """The job process's stdout and stderr (torchrun's too)."""
    return job_dir(job_id) / "job.log"


class JobError(DlguideError):
    """An unknown job, or an action its status does not allow."""


class UnreadableJob(JobError):
    """A `jobs` row that cannot be read (a column that should hold JSON does not): named in one line, never a
    traceback, and never a reason to hide the other jobs."""


@dataclass(frozen=True)
class LaunchFields:
    """Where and how wide a stored job runs, read once from its config (`launch_fields`): the queue, the
    executors, the CLI and the pages read these, never the config's keys. A TensorFlow or an old job has none
    of them: one process, device "auto"."""

    device: str = "auto"  # "auto", "cpu", "cuda" or "cuda:N"
    nnodes: int = 1
    nproc_per_node: int = 1
    rdzv_endpoint: str = ""
    max_restarts: int = 0

    @property
    def device_kind(self) -> str:
        """"cuda" for "cuda:1": what a scheduler is asked for."""
        return self.device.split(":")[0]


def launch_fields(config: Mapping[str, object] | None) -> LaunchFields:
    """A job config's launch fields; absent, empty or unreadable ones mean the default."""
    data = config or {}

    def count(name: str, default: int) -> int:
        value = data.get(name)
        try:
            return int(value) if value else default  # type: ignore[call-overload]  # JSON: int, str or float
        except (TypeError, ValueError):
            return default

    return LaunchFields(device=str(data.get("device") or "auto"), nnodes=count("nnodes", 1),
                        nproc_per_node=count("nproc_per_node", 1), rdzv_endpoint=str(data.get("rdzv_endpoint") or ""),
                        max_restarts=count("max_restarts", 0))


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
    # schema v2
    executor: str = "local"  # where the job process runs: "local", or a scheduler's name
    external_id: str | None = None  # the job's id in that scheduler
    owner: str | None = None  # who submitted it
    host: str | None = None  # the machine its process runs on
    boot_id: str | None = None  # that machine's boot (a pid means nothing after a reboot)
    name: str | None = None  # a person's label for it
    tags: tuple[str, ...] = ()
    skipped_files: dict[str, Any] | None = None  # {"count": N, "examples": [...]}: unreadable inputs skipped
    # schema v3
    restarts: int = 0  # times the scheduler ran this same job again (Slurm's requeue: preemption, node failure)
    restart_note: str | None = None  # what the last requeue stopped: "preempted at step 120"

    @property
    def restart_text(self) -> str | None:
        """"preempted at step 120, resumed" once the requeued run is back; None before any requeue."""
        if not self.restart_note:
            return None
        times = f" ({self.restarts} restarts)" if self.restarts > 1 else ""
        return self.restart_note + (", resumed" if self.status != "queued" else ", requeued") + times

    @property
    def launch(self) -> LaunchFields:
        """Its config's launch fields (nodes, processes per node, device), read once."""
        return launch_fields(self.config)

    @property
    def job_dir(self) -> Path:
        return job_dir(self.id)

    @property
    def log_path(self) -> Path:
        return log_path(self.id)

    @property
    def checkpoint_file(self) -> Path | None:
        """Its checkpoint, when one was saved and is still on disk."""
        return Path(self.checkpoint) if self.checkpoint and Path(self.checkpoint).is_file() else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["class_names"] = list(self.class_names)
        data["tags"] = list(self.tags)
        return data


@dataclass(frozen=True)
class JobSummary:
    """One job-table row (JobStore.summary): progress, recent images/s and an ETA. Its fields, in this order,
    lead each `jobs list --json` record."""

    id: str
    recipe: str
    status: str
    epoch: int | None  # of the last step (0 = the first)
    step: int | None  # the last step recorded
    total_steps: int | None
    images_per_s: float | None  # the mean of the recent steps
    eta_s: float | None  # from the recent step rate, while it runs
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def display_name(job: Job) -> str:
    """How a person knows a run: the name they gave it, else its recipe and start time (never the hash id)."""
    if job.name:
        return job.name
    return f"{job.recipe} · {time.strftime('%Y-%m-%d %H:%M', time.localtime(job.started or job.created))}"


def display_label(job: Job) -> str:
    """A run in a picker or a legend: its display name first, the id secondary ("baseline (20260101-…-ab12)")."""
    return f"{display_name(job)} ({job.id})"


def status_word(job: Job) -> str:
    """The job's state as the Train page and the CLI say it: "cancel requested" while a cancelled job still runs
    (it stops at its next step, or after the validation pass it is in), else its status."""
    return "cancel requested" if job.cancel_requested and job.status == "running" else job.status


def epoch_label(epoch: int | None) -> int | None:
    """An epoch as people count it (1 = the first); the store and the loop count from 0."""
    return None if epoch is None else epoch + 1


def with_epoch_number(row: Mapping[str, object]) -> dict[str, Any]:
    """A JSON record with an `epoch` (the store's, from 0: a contract since issue 31) and, added beside it,
    `epoch_number`: the same epoch as people count it and as every text says it (from 1)."""
    epoch = row.get("epoch")
    return {**row, "epoch_number": epoch_label(epoch) if isinstance(epoch, int) else None}


def devices_of(config: str | dict[str, Any] | None) -> int:
    """Devices a job occupies on this machine: its processes per node (1 for a plain or TF job)."""
    try:
        data = json.loads(config) if isinstance(config, str) else config
        return max(launch_fields(data).nproc_per_node, 1)
    except (TypeError, ValueError, AttributeError):  # an unreadable config (jobs.job.UnreadableJob) counts as one
        return 1


def row_to_job(row: Mapping[str, Any], *, lenient: bool = False) -> Job:
    """A `jobs` row of any schema version (a read-only v1 store has no v2 columns, a v2 store no v3 ones);
    UnreadableJob, naming the job and the column, when a JSON column does not hold the JSON it should
    (`lenient`: that column read as empty, enough to delete the job)."""
    empty = {"config": "{}", "class_names": "[]", "tags": "[]", "skipped_files": None}
    fixed = dict(row)
    for column, kind in (("config", dict), ("class_names", list), ("tags", list), ("skipped_files", dict)):
        text = row[column] if column in row.keys() else None
        if column != "config" and text is None:
            continue
        try:
            value = json.loads(text) if isinstance(text, (str, bytes)) else None
        except ValueError:
            value = None
        if not isinstance(value, kind) and lenient:
            fixed[column] = empty[column]
        elif not isinstance(value, kind):
            raise UnreadableJob(f"job {row['id']} cannot be read: its {column} is not a JSON {kind.__name__} "
                                "(the row was written by hand or damaged); `jobs delete` removes it")
    return _row_to_job(fixed)


def _row_to_job(row: Mapping[str, Any]) -> Job:
    have = set(row.keys())

    def v2(key: str, default: Any = None) -> Any:
        return row[key] if key in have and row[key] is not None else default

    return Job(id=row["id"], recipe=row["recipe"], framework=row["framework"], config=json.loads(row["config"]),
               status=row["status"], pid=row["pid"], slot=row["slot"], created=row["created"],
               started=row["started"], finished=row["finished"], error=row["error"], checkpoint=row["checkpoint"],
               checkpoint_step=row["checkpoint_step"], total_steps=row["total_steps"], epochs=row["epochs"],
               class_names=tuple(json.loads(row["class_names"] or "[]")),
               cancel_requested=bool(row["cancel_requested"]), attempts=row["attempts"],
               executor=v2("executor", "local"), external_id=v2("external_id"),
               owner=qualified(v2("owner")) if v2("owner") else None,  # a plain name of an older store: its namespace
               host=v2("host"), boot_id=v2("boot_id"), name=v2("name"),
               tags=tuple(json.loads(v2("tags", "[]"))), skipped_files=json.loads(v2("skipped_files", "null")),
               restarts=v2("restarts", 0), restart_note=v2("restart_note"))
