"""AppTest of the Train page: the job table and a running job's live chart, read from the store."""

from __future__ import annotations

import json
import os
import time

import pytest

from dlguide_core.datasets import write_toy_dataset
from dlguide_core.jobs import JobStore
from dlguide_core.recipes import get_recipe
from tests.apptest import open_app


def _running_job_with_metrics(steps: int = 50) -> str:
    """A job the store believes runs in this (alive) test process, with steps and one epoch."""
    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=2)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, 100, 2, ("a", "b"))
    now = time.time()
    store.add_steps([(job.id, s, 0, 2.0 / s, 0.001, 40.0, now + s * 0.01, None) for s in range(1, steps + 1)])
    store.add_epoch(job.id, 0, {"train_loss": 0.9, "val_loss": 0.8, "top1": 55.0, "top5": 100.0})
    return job.id


def test_page_shows_the_job_table_and_a_running_jobs_charts() -> None:
    job_id = _running_job_with_metrics()
    at = open_app("pages/train.py")
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table["job"]) == [job_id]
    assert table["status"][0] == "running" and table["progress"][0] == "50/100"
    charts = at.get("plotly_chart")
    assert len(charts) == 5, "loss, lr, images/s and the two per-epoch charts"
    loss_chart = json.loads(charts[0].proto.spec)
    assert loss_chart["layout"]["title"]["text"] == "Training loss per step"
    assert [t["name"] for t in loss_chart["data"]] == [f"{job_id} raw", f"{job_id} EMA 0.60"]
    assert at.multiselect(key="train_view_jobs").value == [job_id]


def test_page_without_data_explains_what_to_do(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    at = open_app("pages/train.py")
    assert not at.exception
    assert any("No dataset found" in i.value for i in at.info)
    assert any("No jobs yet" in i.value for i in at.info)


@pytest.mark.slow
def test_form_queues_a_job_that_runs(tmp_path, monkeypatch) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=4, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app("pages/train.py")
    at.selectbox(key="train_recipe").select("cifar_net").run()
    at.number_input(key="train_cifar_net_epochs").set_value(1)
    at.number_input(key="train_cifar_net_workers").set_value(0)
    at.button(key="train_cifar_net_start").click().run()
    assert not at.exception, at.exception
    assert any("Job " in s.value for s in at.success)
    store = JobStore()
    (job,) = store.list_jobs()
    assert job.config["data"] == str((tmp_path / "roots" / "toy").resolve()) and job.config["epochs"] == 1
    deadline = time.time() + 120
    while store.get(job.id).status in ("queued", "running") and time.time() < deadline:
        time.sleep(0.5)
    assert store.get(job.id).status == "succeeded", store.get(job.id).error
