"""Copy one job store into another (SQLite -> PostgreSQL, or back): every job with its metrics.

Idempotent: jobs already in the target are kept as they are, and only rows the target lacks
are added, so a second copy adds nothing. Each job goes in one transaction, then its step and
epoch counts are checked against the source.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlguide_core.errors import StoreError
from dlguide_core.jobs.dialect import upsert
from dlguide_core.jobs.store import JobStore

_METRICS = (("steps", "step"), ("epochs", "epoch"))


@dataclass(frozen=True)
class CopyReport:
    jobs: int  # jobs added to the target
    steps: int  # step rows added
    epochs: int  # epoch rows added
    total_jobs: int  # jobs in the source, all now in the target


def _count(store: JobStore, table: str, job_id: str) -> int:
    return store.db.rows(f"SELECT count(*) FROM {table} WHERE job_id = ?", (job_id,))[0][0]


def copy_store(source: JobStore, target: JobStore) -> CopyReport:
    added = {"jobs": 0, "steps": 0, "epochs": 0}
    rows = source.db.rows("SELECT * FROM jobs ORDER BY created, id")
    for row in rows:
        job_id = row["id"]
        before = {t: _count(target, t, job_id) for t, _ in _METRICS}
        with target.db.transaction() as db:
            columns = list(row.keys())
            done = db.execute(upsert("jobs", columns, ("id",), replace=False), tuple(row[c] for c in columns))
            added["jobs"] += max(done.rowcount, 0)
            for table, key in _METRICS:
                metrics = source.db.rows(f"SELECT * FROM {table} WHERE job_id = ? ORDER BY {key}", (job_id,))
                if metrics:
                    names = list(metrics[0].keys())
                    db.executemany(upsert(table, names, ("job_id", key), replace=False), [tuple(m) for m in metrics])
        for table, _ in _METRICS:
            have, want = _count(target, table, job_id), _count(source, table, job_id)
            if have < want:
                raise StoreError(f"copy of job {job_id} to {target.url.masked} is short: {have} of {want} {table}")
            added[table] += have - before[table]
    return CopyReport(added["jobs"], added["steps"], added["epochs"], len(rows))
