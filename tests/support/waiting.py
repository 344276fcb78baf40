"""Waiting with a deadline: poll until something holds, and fail saying what was awaited.

Limits here are generous on purpose (a loaded CI box): they check behaviour, not speed (speed lives in bench/).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
FINAL = ("succeeded", "failed", "cancelled", "interrupted")


def wait_for(predicate: Callable[[], T], timeout: float = 120.0, every: float = 0.2,
             what: str | Callable[[], str] = "a condition") -> T:
    """Call `predicate` until it returns something truthy, and return that; AssertionError at the deadline
    (`what` names what was awaited; a callable is asked only then, e.g. for a job's log)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what() if callable(what) else what}")
        time.sleep(every)


def wait_until_done(store: Any, job_id: str, timeout: float = 240.0, every: float = 0.3) -> Any:
    """The job once it is no longer queued or running (a JobStore and a job id); its log ends the failure."""

    def log() -> str:
        job = store.get(job_id)
        text = job.log_path.read_text(errors="replace")[-3000:] if job.log_path.is_file() else "(no log)"
        return f"job {job_id} to finish (still {job.status}). Log:\n{text}"

    return wait_for(lambda: (job := store.get(job_id)).status not in ("queued", "running") and job,
                    timeout=timeout, every=every, what=log)
