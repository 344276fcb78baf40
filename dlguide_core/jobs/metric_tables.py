"""The job store's metrics: one row per optimiser step (`steps`) and per epoch (`epochs`) of every job.

The job process writes them (through StoreSink); pages, the CLI and exports read them back as
columns or rows. `JobStore` is a `MetricTables`, so every query here is a method of the store.
"""

from __future__ import annotations

import io
import json
import math
import time
from typing import Any

from dlguide_core import csv_cells
from dlguide_core.jobs.database import Database
from dlguide_core.jobs.dialect import upsert
from dlguide_core.training.sinks import STEP_EXTRAS

STEP_COLUMNS = ("step", "epoch", "loss", "lr", "images_per_s", "time")
EPOCH_COLUMNS = ("epoch", "train_loss", "val_loss", "top1", "top5", "time")
EPOCH_METRICS = ("train_loss", "val_loss", "top1", "top5")  # the epoch columns a recipe reports

_STEP_UPSERT = upsert("steps", ("job_id", *STEP_COLUMNS, "extra"), ("job_id", "step"))
_EPOCH_UPSERT = upsert("epochs", ("job_id", *EPOCH_COLUMNS, "extra"), ("job_id", "epoch"))


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


class MetricTables(Database):
    """Writes and reads the `steps` and `epochs` tables (the base of JobStore, on its connection)."""

    def add_steps(self, rows: list[tuple]) -> None:
        """Rows of (job_id, step, epoch, loss, lr, images_per_s, time, extra_json), one transaction."""
        if rows:
            with self._tx() as db:
                db.executemany(_STEP_UPSERT, rows)

    def add_epoch(self, job_id: str, epoch: int, metrics: dict[str, Any]) -> None:
        known = {k: metrics.get(k) for k in EPOCH_METRICS}
        extra = {k: v for k, v in metrics.items() if k not in known}
        with self._tx() as db:
            db.execute(_EPOCH_UPSERT, (job_id, epoch, *known.values(), time.time(), json.dumps(extra, default=str)))

    def trim_metrics(self, job_id: str, step: int, epoch: int) -> None:
        """Drop steps after `step` and epochs from `epoch` on: a run starting there redoes them."""
        with self._tx() as db:
            db.execute("DELETE FROM steps WHERE job_id = ? AND step > ?", (job_id, step))
            db.execute("DELETE FROM epochs WHERE job_id = ? AND epoch >= ?", (job_id, epoch))

    def steps(self, job_id: str, after: int = 0, *, extras: bool = True) -> dict[str, list]:
        """Per-step metrics after step `after`, as columns: STEP_COLUMNS, then (with `extras`) the
        STEP_EXTRAS columns, None where a recipe does not record one."""
        rows = self._rows(f"SELECT {', '.join(STEP_COLUMNS)}, extra FROM steps WHERE job_id = ? AND step > ? "
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
        rows = self._rows("SELECT time FROM steps WHERE job_id = ? AND step = ?", (job_id, step))
        return bool(rows) and rows[0][0] == at

    def last_step(self, job_id: str) -> dict[str, Any] | None:
        rows = self._rows(f"SELECT {', '.join(STEP_COLUMNS)} FROM steps WHERE job_id = ? ORDER BY step DESC LIMIT 1",
                          (job_id,))
        return dict(rows[0]) if rows else None

    def recent_steps(self, job_id: str, count: int = 20) -> list[dict[str, Any]]:
        rows = self._rows(f"SELECT {', '.join(STEP_COLUMNS)} FROM steps WHERE job_id = ? ORDER BY step DESC "
                          "LIMIT ?", (job_id, count))
        return [dict(r) for r in reversed(rows)]

    def per_class_accuracy(self, job_id: str) -> dict[str, float]:
        """Top-1 (percent) per class at the last evaluated epoch, as the guide's CIFAR-10 CNN section prints at the end;
        {} when no epoch recorded it (TensorFlow recipes, or none finished yet)."""
        rows = self._rows("SELECT extra FROM epochs WHERE job_id = ? ORDER BY epoch DESC LIMIT 1", (job_id,))
        extra = json.loads(rows[0]["extra"] or "{}") if rows else {}
        per_class = extra.get("per_class")
        return dict(per_class) if isinstance(per_class, dict) else {}

    def epochs(self, job_id: str) -> list[dict[str, Any]]:
        rows = self._rows(f"SELECT {', '.join(EPOCH_COLUMNS)}, extra FROM epochs WHERE job_id = ? ORDER BY epoch",
                          (job_id,))
        return [{**{k: r[k] for k in EPOCH_COLUMNS}, **json.loads(r["extra"] or "{}")} for r in rows]

    def metrics_csv(self, job_id: str) -> str:
        """Per-step rows joined with the metrics of the epoch each step belongs to."""
        by_epoch = {e["epoch"]: e for e in self.epochs(job_id)}
        out = io.StringIO()
        writer = csv_cells.writer(out)  # formula-like text escaped (OWASP CSV injection)
        writer.writerow([*STEP_COLUMNS, *EPOCH_METRICS, *(e[0] for e in STEP_EXTRAS)])
        cols = self.steps(job_id)
        for i in range(len(cols["step"])):
            epoch = by_epoch.get(cols["epoch"][i], {})
            writer.writerow([cols[c][i] for c in STEP_COLUMNS] +
                            [epoch.get(k, "") for k in EPOCH_METRICS] +
                            ["" if cols[c][i] is None else cols[c][i] for c, _, _ in STEP_EXTRAS])
        return out.getvalue()
