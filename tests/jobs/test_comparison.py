"""Run summaries and the columns that differ between runs (torch-free: `jobs list --json` uses them)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.comparison import RunSummary, comparison_rows, differing_fields, run_summary
from dlguide_core.jobs.store import JobStore
from tests.support.paths import ROOT


def finished_job(store: JobStore, config: dict, epochs: list[tuple[float, float, float]], ips: float = 20.0):
    """A succeeded job with 4 steps per epoch and (val_loss, top1, top5) per epoch."""
    job = store.create("cifar_net", "pytorch", config)
    store.claim(job.id, 1)
    for e, (val_loss, top1, top5) in enumerate(epochs):
        store.add_steps([(job.id, 4 * e + s, e, 1.0, 0.1, ips, time.time(), None) for s in range(1, 5)])
        store.add_epoch(job.id, e, {"train_loss": 1.0, "val_loss": val_loss, "top1": top1, "top5": top5})
    store.finish(job.id, "succeeded")
    return store.get(job.id, refresh=False)


def test_differing_fields_lead_with_what_people_compare() -> None:
    configs = [{"lr": 0.1, "batch_size": 32, "seed": 0, "workers": 2, "data": "d"},
               {"lr": 0.01, "batch_size": 32, "seed": 1, "workers": 4, "data": "d", "amp": True}]
    assert differing_fields(configs) == ["lr", "amp", "seed"]  # workers: scheduling, not training
    assert differing_fields(configs[:1]) == []


def test_run_summary_final_best_and_wall_time() -> None:
    store = JobStore()
    job = finished_job(store, {"lr": 0.1}, [(2.0, 40.0, 80.0), (1.5, 60.0, 90.0), (1.6, 55.0, 92.0)])
    summary = run_summary(store, job)
    assert summary.final_top1 == 55.0 and summary.best_top1 == 60.0
    assert summary.final_top5 == 92.0 and summary.best_top5 == 92.0
    assert summary.final_val_loss == 1.6
    assert summary.wall_s == pytest.approx(job.finished - job.started)
    queued = store.create("cifar_net", "pytorch", {})
    assert run_summary(store, queued) == RunSummary()  # nothing to say yet


def test_comparison_rows_and_jobs_list_json(capsys) -> None:
    store = JobStore()
    a = finished_job(store, {"lr": 0.1, "batch_size": 32}, [(2.0, 40.0, 80.0)], ips=10.0)
    b = finished_job(store, {"lr": 0.01, "batch_size": 32}, [(1.0, 70.0, 95.0)], ips=30.0)
    rows = comparison_rows(store, [a, b])
    assert [r["lr"] for r in rows] == [0.1, 0.01] and "batch_size" not in rows[0]
    assert [r["final_top1"] for r in rows] == [40.0, 70.0]
    assert [r["images_per_s"] for r in rows] == [10.0, 30.0]
    assert main(["jobs", "list", "--json"]) == 0
    listed = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    old_keys = {"id", "recipe", "status", "epoch", "step", "total_steps", "images_per_s", "eta_s", "error", "created"}
    new_keys = {"final_top1", "final_top5", "best_top1", "best_top5", "final_val_loss", "wall_s", "config",
                "epoch_number"}
    assert set(listed[b.id]) == old_keys | new_keys  # keys added, none renamed
    assert list(listed[b.id]) == ["id", "recipe", "status", "epoch", "step", "total_steps", "images_per_s", "eta_s",
                                  "error", "created", "final_top1", "final_top5", "best_top1", "best_top5",
                                  "final_val_loss", "wall_s", "config", "epoch_number"]  # the old order, then added
    assert listed[b.id]["best_top5"] == 95.0 and listed[b.id]["config"] == {"lr": 0.01, "batch_size": 32}


def test_jobs_show_json_keeps_its_keys(capsys) -> None:
    store = JobStore()
    job = finished_job(store, {"lr": 0.1, "epochs": 1}, [(2.0, 40.0, 80.0)])
    assert main(["jobs", "show", job.id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    job_keys = ["id", "recipe", "framework", "config", "status", "pid", "slot", "created", "started", "finished",
                "error", "checkpoint", "checkpoint_step", "total_steps", "epochs", "class_names", "cancel_requested",
                "attempts", "executor", "external_id", "owner", "host", "boot_id", "name", "tags", "skipped_files",
                "restarts", "restart_note"]  # issue 32: keys are only ever added
    assert list(shown) == job_keys + ["scheduler", "planned_epochs", "last_step", "per_class_accuracy", "warnings"]
    assert shown["epochs"] == [{"epoch": 0, "train_loss": 1.0, "val_loss": 2.0, "top1": 40.0, "top5": 80.0,
                                "time": shown["epochs"][0]["time"], "epoch_number": 1}]  # `epochs`: Job's count
    # replaced by the rows; `epoch_number` (issue 43) added last, the same epoch counted from 1 as the texts say it


def test_summaries_and_tensorboard_export_do_not_import_torch() -> None:
    code = ("import sys\nimport dlguide_core.jobs.comparison, dlguide_core.jobs.tensorboard_export\n"
            "print('torch' in sys.modules, 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
