"""Comparing runs (TensorBoard's HParams, W&B's runs table): what each run scored and what changed.

Torch-free on purpose: `jobs list --json` calls `run_summary` for every job.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dlguide_core.jobs.store import Job, JobStore

# The configuration fields people compare first, in this order; any other differing field follows.
LEADING_FIELDS = ("lr", "batch_size", "image_size", "amp", "amp_dtype", "epochs", "nproc_per_node", "nnodes",
                  "weights", "label_smoothing", "max_steps", "data")
# Never a column: where a run writes or how it is scheduled, not what it trains.
IGNORED_FIELDS = ("checkpoint_minutes", "rdzv_endpoint", "workers", "device")


@dataclass(frozen=True)
class RunSummary:
    """What a run scored: final and best val top-1/top-5 (percent; None before an epoch is scored), the final
    val loss and the wall time of the job's last attempt (to now while it runs). Its fields, in this order,
    follow `created` in each `jobs list --json` record, and are columns of the run comparison."""

    final_top1: float | None = None
    final_top5: float | None = None
    best_top1: float | None = None
    best_top5: float | None = None
    final_val_loss: float | None = None
    wall_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_summary(store: JobStore, job: Job, now: float | None = None) -> RunSummary:
    epochs = store.epochs(job.id)
    top1 = [value for e in epochs if (value := e.get("top1")) is not None]
    top5 = [value for e in epochs if (value := e.get("top5")) is not None]
    last = epochs[-1] if epochs else {}
    end = job.finished if job.finished is not None else (now or time.time())
    return RunSummary(final_top1=last.get("top1"), final_top5=last.get("top5"),
                      best_top1=max(top1, default=None), best_top5=max(top5, default=None),
                      final_val_loss=last.get("val_loss"),
                      wall_s=end - job.started if job.started is not None and job.status != "queued" else None)


def differing_fields(configs: Sequence[dict[str, Any]]) -> list[str]:
    """Config fields whose values are not the same in every run (a missing field counts as None)."""
    if len(configs) < 2:
        return []
    names = {k for cfg in configs for k in cfg} - set(IGNORED_FIELDS)
    differ = {k for k in names if len({repr(cfg.get(k)) for cfg in configs}) > 1}
    return [k for k in LEADING_FIELDS if k in differ] + sorted(differ - set(LEADING_FIELDS))


def comparison_rows(store: JobStore, jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """One row per run: id, recipe, the differing config fields, the scores, wall time and images/s."""
    fields = differing_fields([job.config for job in jobs])
    rows = []
    for job in jobs:
        rows.append({"id": job.id, "recipe": job.recipe, "status": job.status,
                     **{f: _cell(job.config.get(f)) for f in fields},
                     **run_summary(store, job).to_json(), "images_per_s": store.summary(job).images_per_s})
    return rows


def _cell(value: Any) -> Any:
    # Tables want scalars: lists and dicts become their text.
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)
