"""Folding the schedulers' view into the store: `sync(store)` for the Train page, `jobs list/show/logs`.

A job on a scheduler records its own life (claim, metrics, final status) from its process. The scheduler is
asked only for what that process cannot say: that it is still pending (and why), or that it ended without a
word (killed at the time limit, node failure, cancelled while pending). Each answer is kept in the job folder
(`scheduler.json`), so a page whose scheduler stops answering still shows the last known state.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

from dlguide_core.errors import DlguideError, error_summary
from dlguide_core.jobs.executors.base import ExternalStatus, SchedulerNotAnswering
from dlguide_core.jobs.executors.registry import DEFAULT, get_executor
from dlguide_core.jobs.store import ACTIVE, Job, JobStore, job_dir

STATE_FILE = "scheduler.json"  # in the job folder: the scheduler's last answer and when it came


@dataclass(frozen=True)
class SyncReport:
    """What one sync learnt: each asked job's scheduler status, and each executor that did not answer."""

    statuses: dict[str, ExternalStatus] = field(default_factory=dict)
    not_answering: dict[str, str] = field(default_factory=dict)  # executor name -> "Slurm is not answering"


def executor_of(job: Job) -> str:
    return getattr(job, "executor", None) or DEFAULT


def sync(store: JobStore, jobs: list[Job] | None = None) -> SyncReport:
    """Ask each non-local executor about its queued and running jobs and apply what the jobs could not record.
    An executor that does not answer is asked no more in this call; its jobs keep their last known state."""
    report = SyncReport()
    for job in jobs if jobs is not None else store.list_jobs(refresh=False):
        name = executor_of(job)
        if job.status not in ACTIVE or name == DEFAULT or name in report.not_answering:
            continue
        try:
            answer = get_executor(name).status(job)
        except SchedulerNotAnswering as exc:
            report.not_answering[name] = str(exc)
            continue
        except (DlguideError, OSError) as exc:  # no address, no client, no command here: unknown, not an error
            report.not_answering[name] = f"{name} cannot be asked from this host ({error_summary(exc)})"
            continue
        report.statuses[job.id] = answer
        _remember(job.id, answer)
        apply(store, job.id, answer, asked=job.external_id)
    return report


def apply(store: JobStore, job_id: str, answer: ExternalStatus, asked: str | None = None) -> bool:
    """A final scheduler state for a job the store still holds active: the job ended without recording it.
    Re-read after the answer: the job process writes its ending before it exits, and it exits before the
    scheduler reports the end, so a job that spoke for itself is never overwritten. `asked`: the scheduler's id the
    answer is about; a job resumed meanwhile (a new id, or none yet) is not the job that answer describes."""
    if answer.status is None or answer.status in ACTIVE:
        return False
    job = store.get(job_id, refresh=False)
    if job.status not in ACTIVE or (asked is not None and job.external_id != asked):
        return False
    if answer.status == "succeeded":  # the scheduler saw a clean exit, but the job recorded no result
        store.finish(job_id, "interrupted", f"{answer.state or 'the scheduler'}: the job ended without recording "
                     "its result (see its log); resume continues it")
    else:
        store.finish(job_id, answer.status, answer.reason)
    return True


def _remember(job_id: str, answer: ExternalStatus) -> None:
    path = job_dir(job_id) / STATE_FILE
    try:
        path.write_text(json.dumps({**asdict(answer), "time": time.time()}))
    except OSError:
        pass  # a job folder removed meanwhile: nothing to remember


def last_known(job_id: str) -> ExternalStatus | None:
    """The scheduler's last answer about the job (kept by sync), or None."""
    try:
        data = json.loads((job_dir(job_id) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return ExternalStatus(data.get("status"), data.get("reason"), data.get("state", ""))


class Watcher:
    """`sync` in a background thread every `every_s`, so a page never waits on a scheduler: it reads `latest()`
    (the last report and when it came). A scheduler that hangs delays only this thread."""

    def __init__(self, store: JobStore, every_s: float = 3.0) -> None:
        import threading

        self.store, self.every_s = store, every_s
        self._latest: tuple[SyncReport, float | None] = (SyncReport(), None)
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dlguide-scheduler-watch", daemon=True)
        self._thread.start()

    def latest(self) -> tuple[SyncReport, float | None]:
        return self._latest

    def poke(self) -> None:
        """Sync soon (after a submit, cancel or resume)."""
        self._wake.set()

    def _loop(self) -> None:
        while True:
            try:
                self._latest = (sync(self.store), time.time())
            except Exception as exc:  # noqa: BLE001 - a store or scheduler hiccup must not end the watch
                self._latest = (SyncReport(not_answering={"store": f"could not check the schedulers: {exc}"}),
                                time.time())
            self._wake.wait(self.every_s)
            self._wake.clear()
