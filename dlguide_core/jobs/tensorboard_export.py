"""TensorBoard event files for every job, from the job store: each job folder's `tensorboard/`.

`tensorboard --logdir $DLGUIDE_HOME/jobs` then shows every run. A running training job writes its
own through `job_sink` (training.tensorboard.TensorBoardSink, rebuilt from the store at each start);
jobs older than that get theirs with `export_job` (`jobs export ID --tensorboard DIR`).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from dlguide_core.jobs.catalog import is_training
from dlguide_core.jobs.store import JobError, JobStore, job_dir, open_store
from dlguide_core.jobs.store_url import StoreUrl
from dlguide_core.training.tensorboard import (
    TensorBoardSink,
    open_writer,
    remove_event_files,
    write_epoch,
    write_step,
)

FOLDER = "tensorboard"  # inside each job folder


def job_logdir(job_id: str) -> Path:
    return job_dir(job_id) / FOLDER


def export_job(store: JobStore, job_id: str, logdir: Path) -> Path:
    """Write a job's stored metrics into `logdir` (its old event files replaced); returns logdir."""
    job = store.get(job_id, refresh=False)  # an unknown id fails before anything is written
    if not is_training(job.recipe):
        raise JobError(f"job {job_id} is an {job.recipe} job: it has no training curves to export")
    remove_event_files(logdir)
    writer = open_writer(logdir)
    try:
        cols = store.steps(job_id)
        for i in range(len(cols["step"])):
            write_step(writer, {name: values[i] for name, values in cols.items()})
        for row in store.epochs(job_id):
            write_epoch(writer, row["epoch"], row, row.get("time"))
    finally:
        writer.close()
    return logdir


def job_sink(store_url: StoreUrl, job_id: str, logdir: Path | None = None, flush_s: float = 2.0) -> TensorBoardSink:
    """The running job's TensorBoardSink (in its folder unless `logdir`). Place it after the job's
    StoreSink in a TeeSink: its on_start then finds the store already trimmed to where this run starts."""
    return TensorBoardSink(logdir or job_logdir(job_id), partial(_export_from, store_url, job_id), flush_s=flush_s)


def _export_from(store_url: StoreUrl, job_id: str, logdir: Path) -> None:
    store = open_store(store_url)  # the sink's own connection: it runs on the job process's threads
    try:
        export_job(store, job_id, logdir)
    finally:
        store.close()
