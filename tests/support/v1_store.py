"""The v1 store fixture (tests/data/store_v1/): a DLGUIDE_HOME written by the release before
schema versions (commit af71cde), kept to test that every upgrade keeps what that release wrote.

`python -m tests.support.v1_store DIR` wrote it, run on a checkout of af71cde (through the old
JobStore API only). `EXPECTED` is what the tests read back after an upgrade.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "store_v1"

# (recipe, framework, config, final status, error, steps, epochs)
JOBS = (
    ("cifar_net", "pytorch", {"epochs": 2, "lr": 0.01}, "succeeded", None, 6, 2),
    ("cifar_net", "pytorch", {"epochs": 3}, "cancelled", None, 4, 1),
    ("inception_v3", "pytorch", {"epochs": 1}, "interrupted", "process 4242 was killed (SIGKILL)", 3, 0),
    ("cifar_net", "pytorch", {"epochs": 1}, "failed", "RuntimeError: diverged", 2, 0),
    ("tf_fashion_mnist", "tensorflow", {"epochs": 1}, "succeeded", None, 5, 1),
    ("cifar_net", "pytorch", {"epochs": 1, "nproc_per_node": 2, "nnodes": 1}, "succeeded", None, 4, 1),
    ("evaluate", "pytorch", {"checkpoint": "/x/best.pt"}, "succeeded", None, 0, 1),
)


def write(home: Path) -> None:
    os.environ["DLGUIDE_HOME"] = str(home)
    from dlguide_core.jobs.store import JobStore, job_dir

    store = JobStore()
    for n, (recipe, framework, config, status, error, steps, epochs) in enumerate(JOBS):
        job = store.create(recipe, framework, config)
        store.claim(job.id, os.getpid())
        store.set_plan(job.id, steps or None, max(epochs, 1), ("cat", "dog"))
        store.add_steps([(job.id, s, (s - 1) // 3, 2.0 / s, 0.01, 100.0 + n, 1.7e9 + n * 100 + s,
                          json.dumps({"accuracy": 0.5}) if framework == "tensorflow" else None)
                         for s in range(1, steps + 1)])
        for e in range(epochs):
            store.add_epoch(job.id, e, {"train_loss": 1.0 / (e + 1), "val_loss": 1.1, "top1": 40.0 + e,
                                        "top5": 90.0, "per_class": {"cat": 50.0, "dog": 30.0}})
        if steps:
            ckpt = job_dir(job.id) / "checkpoint.pt"
            ckpt.write_bytes(b"checkpoint of " + job.id.encode())
            store.set_checkpoint(job.id, ckpt, steps, max(epochs - 1, 0))
            tb = job_dir(job.id) / "tensorboard" / "events.out.tfevents.1700000000.host"
            tb.parent.mkdir()
            tb.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00event-" + job.id.encode())
        store.set_pid(job.id, 999999)
        store.finish(job.id, status, error)
    store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    for extra in ("jobs.db-wal", "jobs.db-shm"):
        (home / extra).unlink(missing_ok=True)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    shutil.rmtree(target, ignore_errors=True)
    write(target)
