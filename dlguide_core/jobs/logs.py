"""A job's log as the pages and the CLI read it: the tail of the job process's output, one function so that
executors with logs of their own (Slurm, Ray) can be read through it too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlguide_core.jobs.executors import registry, tracking
from dlguide_core.jobs.store import Job

TAIL_BYTES = 64_000  # the last ~1000 lines: enough to see a traceback, small enough to redraw every few seconds


@dataclass(frozen=True)
class JobLog:
    source: str  # where the text comes from (a path), shown beside it
    text: str  # the tail, decoded (bad bytes replaced)
    size: int  # bytes in the whole log
    truncated: bool  # the text starts mid-log

    @property
    def empty(self) -> bool:
        return not self.text


def job_log(job: Job, max_bytes: int = TAIL_BYTES) -> JobLog:
    """The last `max_bytes` of `job`'s log (whole lines); an empty JobLog when there is none yet."""
    return read_tail(registry.get_executor(tracking.executor_of(job)).log_file(job), max_bytes)  # Slurm: its output


def read_tail(path: Path, max_bytes: int = TAIL_BYTES) -> JobLog:
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(size - max_bytes, 0))
            data = handle.read(max_bytes)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return JobLog(str(path), "", 0, False)
    truncated = size > max_bytes
    if truncated and b"\n" in data:
        data = data[data.index(b"\n") + 1:]  # drop the partial first line
    return JobLog(str(path), data.decode("utf-8", errors="replace"), size, truncated)
