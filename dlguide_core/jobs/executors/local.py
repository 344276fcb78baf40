"""The local executor (the default): today's queue on this machine (jobs.queue, jobs.launch), wrapped.

Submit queues the job in the store and dispatches it onto a free device; the job process is the runner
(or torchrun over workers) started detached; cancel sets the store's flag; resume re-queues it. Its log is
`jobs/<id>/job.log`. The store's own liveness check (jobs.liveness through JobStore.refresh) is its status.
"""

from __future__ import annotations

from typing import Any

from dlguide_core.jobs import queue
from dlguide_core.jobs.executors.base import Availability, Executor, ExternalStatus
from dlguide_core.jobs.store import Job, JobStore


class LocalExecutor(Executor):
    name = "local"

    def available(self) -> Availability:
        return Availability(True, None)

    def submit(self, store: JobStore, recipe: str, config: Any, options: Any = None) -> Job:
        return queue.submit(store, recipe, config)

    def hand_over(self, store: JobStore, job: Job, options: Any = None) -> Job:
        queue.dispatch(store)
        return store.get(job.id, refresh=False)

    def status(self, job: Job) -> ExternalStatus:
        # This machine is the scheduler: the store's status, kept true by JobStore.refresh.
        return ExternalStatus(job.status, job.error, job.status)

    def cancel(self, store: JobStore, job: Job) -> Job:
        return store.request_cancel(job.id)
