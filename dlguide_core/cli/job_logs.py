"""`jobs logs ID [--follow]` and following a submitted job to its end: the log of any executor.

Local jobs log to jobs/<id>/job.log; Slurm jobs to the batch output file in the job folder; the executor
says which (Executor.log_file). While following, the scheduler is asked now and then (tracking.sync) so a
job that its scheduler ended without a word still ends the follow.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from dlguide_core.jobs.executors import tracking
from dlguide_core.jobs.executors.registry import get_executor
from dlguide_core.jobs.store import ACTIVE, JobStore

EXIT_OK, EXIT_FAILED = 0, 1
SYNC_EVERY_S = 2.0  # how often a follow asks the scheduler (every poll would load its controller)


def _ended(store: JobStore, job_id: str) -> Callable[[], bool]:
    last = [0.0]

    def ended() -> bool:
        job = store.get(job_id)
        if job.status in ACTIVE and time.monotonic() - last[0] >= SYNC_EVERY_S:
            last[0] = time.monotonic()
            report = tracking.sync(store, [job])
            for message in report.not_answering.values():
                print(f"dlguide: {message}; still following", file=sys.stderr, flush=True)
            job = store.get(job_id, refresh=False)
        return job.status not in ACTIVE

    return ended


def print_log(store: JobStore, job_id: str, follow: bool) -> int:
    job = store.get(job_id)
    executor = get_executor(tracking.executor_of(job))
    path = executor.log_file(job)
    if not follow and not path.is_file():
        print(f"job {job_id} has no log yet ({path})", file=sys.stderr)
        return EXIT_OK
    for line in executor.logs(job, follow=follow, is_final=_ended(store, job_id)):
        print(line, flush=True)
    return EXIT_OK


def follow_to_end(store: JobStore, job_id: str, as_json: bool) -> int:
    """Stream a submitted job's log until it ends; the exit code says whether it succeeded."""
    print_log(store, job_id, follow=True)
    job = store.get(job_id, refresh=False)
    if as_json:
        print(json.dumps({"job_id": job_id, "status": job.status, "error": job.error, "checkpoint": job.checkpoint,
                          "executor": job.executor, "external_id": job.external_id}))
    else:
        print(f"job {job_id} {job.status}" + (f": {job.error}" if job.error else "")
              + (f"; checkpoint {job.checkpoint}" if job.checkpoint else ""), file=sys.stderr)
    return EXIT_OK if job.status == "succeeded" else EXIT_FAILED
