"""The job store's metrics: one row per optimiser step (`steps`) and per epoch (`epochs`) of every job.

The job process writes them (through StoreSink); pages, the CLI and exports read them back as
columns or rows. `JobStore` holds one on its connection (`store.metrics`) and offers each of its
methods under the same name (`store.add_steps`).
"""

from __future__ import annotations

import io
import json
import math
import time
from typing import Any, TypedDict, cast

from dlguide_core import csv_cells
from dlguide_core.jobs.database import Database
from dlguide_core.jobs.dialect import upsert
from dlguide_core.training.sinks import STEP_EXTRAS, EpochMetrics

STEP_COLUMNS = ("step", "epoch", "loss", "lr", "images_per_s", "time")
EPOCH_COLUMNS = ("epoch", "train_loss", "val_loss", "top1", "top5", "time")
EPOCH_METRICS = ("train_loss", "val_loss", "top1", "top5")  # the epoch columns a recipe reports

_STEP_UPSERT = upsert("steps", ("job_id", *STEP_COLUMNS, "extra"), ("job_id", "step"))
_EPOCH_UPSERT = upsert("epochs", ("job_id", *EPOCH_COLUMNS, "extra"), ("job_id", "epoch"))


class EpochRow(EpochMetrics, total=False):
    """One epoch as the store gives it back (`epochs`): what the loop reported, its number and when."""

    epoch: int  # 0 = the first
    time: float


class StepRow(TypedDict):
    """One optimiser step's row (`last_step`, `recent_steps`): STEP_COLUMNS."""

    step: int
    epoch: int
    loss: float | None  # a NaN loss is kept as None
    lr: float
    images_per_s: float
    time: float


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


class MetricTables:
    """Writes and reads the `steps` and `epochs` tables, on the store's connection (a part of JobStore)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def add_steps(self, rows: list[tuple]) -> None:
        """Rows of (job_id, step, epoch, loss, lr, images_per_s, time, extra_json), one transaction."""
        if rows:
            with self._db.transaction() as db:
                db.executemany(_STEP_UPSERT, rows)

    def add_epoch(self, job_id: str, epoch: int, metrics: EpochMetrics) -> None:
        known = {k: metrics.get(k) for k in EPOCH_METRICS}
        extra = {k: v for k, v in metrics.items() if k not in known}
        with self._db.transaction() as db:
            db.execute(_EPOCH_UPSERT, (job_id, epoch, *known.values(), time.time(), json.dumps(extra, default=str)))

    def trim_metrics(self, job_id: str, step: int, epoch: int) -> None:
        """Drop steps after `step` and epochs from `epoch` on: a run starting there redoes them."""
        with self._db.transaction() as db:
            db.execute("DELETE FROM steps WHERE job_id = ? AND step > ?", (job_id, step))
            db.execute("DELETE FROM epochs WHERE job_id = ? AND epoch >= ?", (job_id, epoch))

    def steps(self, job_id: str, after: int = 0, *, extras: bool = True) -> dict[str, list]:
        """Per-step metrics after step `after`, as columns: STEP_COLUMNS, then (with `extras`) the
        STEP_EXTRAS columns, None where a recipe does not record one."""
        rows = self._db.rows(f"SELECT {', '.join(STEP_COLUMNS)}, extra FROM steps WHERE job_id = ? AND step > ? "
                          "ORDER BY step", (job_id, after))
        columns = list(zip(*rows)) or [()] * (len(STEP_COLUMNS) + 1)  # transposed in C: 100,000 rows stay fast
        cols = {name: list(columns[i]) for i, name in enumerate(STEP_COLUMNS)}
        if extras:
            parsed = [json.loads(e) if e else {} for e in columns[-1]]  # json, not SQL: NaN is allowed
            for name, key, scale in STEP_EXTRAS:
                cols[name] = [None if (v := _finite(e.get(key))) is None else v * scale for e in parsed]
        return cols

    def has_step(self, job_id: str, step: int, at: float) -> bool:
        """Whether step `step` is still the row written at time `at` (a reader's cache is current):
        false once a resumed run has trimmed it, or redone it."""
        rows = self._db.rows("SELECT time FROM steps WHERE job_id = ? AND step = ?", (job_id, step))
        return bool(rows) and rows[0][0] == at

    def last_step(self, job_id: str) -> StepRow | None:
        rows = self._db.rows(f"SELECT {', '.join(STEP_COLUMNS)} FROM steps WHERE job_id = ? ORDER BY step DESC LIMIT 1",
                          (job_id,))
        return cast(StepRow, dict(rows[0])) if rows else None

    def recent_steps(self, job_id: str, count: int = 20) -> list[StepRow]:
        rows = self._db.rows(f"SELECT {', '.join(STEP_COLUMNS)} FROM steps WHERE job_id = ? ORDER BY step DESC "
                          "LIMIT ?", (job_id, count))
        return [cast(StepRow, dict(r)) for r in reversed(rows)]

    def per_class_accuracy(self, job_id: str) -> dict[str, float]:
        """Top-1 (percent) per class at the last evaluated epoch, as the guide's CIFAR-10 CNN section prints at the end;
        {} when no epoch recorded it (TensorFlow recipes, or none finished yet)."""
        rows = self._db.rows("SELECT extra FROM epochs WHERE job_id = ? ORDER BY epoch DESC LIMIT 1", (job_id,))
        extra = json.loads(rows[0]["extra"] or "{}") if rows else {}
        per_class = extra.get("per_class")
        return dict(per_class) if isinstance(per_class, dict) else {}

    def epochs(self, job_id: str) -> list[EpochRow]:
        rows = self._db.rows(f"SELECT {', '.join(EPOCH_COLUMNS)}, extra FROM epochs WHERE job_id = ? ORDER BY epoch",
                          (job_id,))
        return [cast(EpochRow, {**{k: r[k] for k in EPOCH_COLUMNS}, **json.loads(r["extra"] or "{}")}) for r in rows]

    def metrics_csv(self, job_id: str) -> str:
        """Per-step rows; the metrics of an epoch on its last step's row only (issue 43: repeated on every step
        row of the epoch, they read as measured at each step), the other rows' epoch cells empty."""
        by_epoch = {e["epoch"]: e for e in self.epochs(job_id)}
        out = io.StringIO()
        writer = csv_cells.writer(out)  # formula-like text escaped (OWASP CSV injection)
        writer.writerow([*STEP_COLUMNS, *EPOCH_METRICS, *(e[0] for e in STEP_EXTRAS)])
        cols = self.steps(job_id)
        last_of = {epoch: i for i, epoch in enumerate(cols["epoch"])}  # each epoch's last step row
        for i in range(len(cols["step"])):
            epoch = by_epoch.get(cols["epoch"][i], {}) if last_of[cols["epoch"][i]] == i else {}
            writer.writerow([cols[c][i] for c in STEP_COLUMNS] +
                            [epoch.get(k, "") for k in EPOCH_METRICS] +
                            ["" if cols[c][i] is None else cols[c][i] for c, _, _ in STEP_EXTRAS])
        return out.getvalue()
