"""The local executor (the default): today's queue on this machine (jobs.queue, jobs.launch), wrapped.

Submit (the base's template) makes the row and hands it to the queue, which dispatches it onto a free device;
the job process is the runner (or torchrun over workers) started detached; cancel sets the store's flag; resume
re-queues it. Its log is `jobs/<id>/job.log`. The store's own liveness check (jobs.liveness through
JobStore.refresh) is its status. The CLI and the Train page queue local jobs through jobs.queue directly.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from dlguide_core.jobs import queue
from dlguide_core.jobs.executors.base import Availability, Executor, ExternalStatus, NoOptions
from dlguide_core.jobs.store import Job, JobStore

if TYPE_CHECKING:
    from dlguide_core.training.recipes import Recipe, RecipeConfig


class LocalExecutor(Executor[NoOptions]):
    name = "local"
    options_cls = NoOptions

    def available(self) -> Availability:
        return Availability(True, None)

    def check(self, recipe: Recipe, config: RecipeConfig, options: NoOptions) -> NoOptions:
        queue.check_devices(recipe.framework, asdict(config))  # before the job is queued
        return options

    def hand_over(self, store: JobStore, job: Job, options: NoOptions) -> Job:
        queue.dispatch(store)
        return store.get(job.id, refresh=False)

    def status(self, job: Job) -> ExternalStatus:
        # This machine is the scheduler: the store's status, kept true by JobStore.refresh.
        return ExternalStatus(job.status, job.error, job.status)

    def cancel(self, store: JobStore, job: Job) -> Job:
        return store.request_cancel(job.id)
