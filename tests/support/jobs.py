"""Jobs recorded straight into the store, as a finished run would leave them (no training needed)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe
from tests.support.checkpoints import toy_checkpoint

TOY_CLASSES = ("class_0", "class_1", "class_2")


def finished_job(store: JobStore, data: Path, lr: float, top1: float, checkpoint: bool = True) -> str:
    """A succeeded cifar_net job over TOY_CLASSES: two steps, one epoch at `top1`, and its checkpoint."""
    cfg = get_recipe("cifar_net").make_config(data=str(data), epochs=1, lr=lr)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, 2, 1, TOY_CLASSES)
    store.add_steps([(job.id, s, 0, 1.0, lr, 40.0, time.time(), None) for s in (1, 2)])
    store.add_epoch(job.id, 0, {"train_loss": 1.0, "val_loss": 0.9, "top1": top1, "top5": 100.0})
    if checkpoint:
        path = toy_checkpoint(job.job_dir / "checkpoint.pt", TOY_CLASSES)
        store.set_checkpoint(job.id, path, 2, 1)
    store.finish(job.id, "succeeded")
    return job.id


def cancel_active(home: Path, wait_s: float = 60.0) -> None:
    """Cancel every queued or running job of the store under DLGUIDE_HOME `home` and wait (up to `wait_s`) until
    none runs: what a bench started must not load the machine after it."""
    from dlguide_core.jobs.store import ACTIVE, JobError

    store = JobStore(home / "jobs.db")
    try:
        for job in store.list_jobs():
            if job.status in ACTIVE:
                try:
                    store.request_cancel(job.id)
                except JobError:
                    continue
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(j.status == "running" for j in store.list_jobs()):
            time.sleep(0.5)
    finally:
        store.close()
