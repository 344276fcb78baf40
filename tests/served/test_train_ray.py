"""Browser: Run on = Ray on the Train page submits the job through Ray's job API to a real local head; the
page says where it runs; the job streams steps into the store; cancel stops it with a checkpoint."""

from __future__ import annotations

import re

import pytest

from dlguide_core.jobs.store import JobStore
from tests.support.toy_data import write_toy_dataset
from tests.support.train_page import cancel_until_ended, start_long_run
from tests.support.waiting import wait_for


@pytest.mark.browser
@pytest.mark.slow
def test_run_on_ray_from_the_train_page(ray_head, app_server, browser_page, tmp_path) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=6, val_per_class=1)
    url = app_server(DLGUIDE_DATA_ROOTS=str(tmp_path / "roots"), RAY_ADDRESS=ray_head.address)
    # offered: ray importable and the head answers; the start line says where it runs
    start_long_run(browser_page, url, "Ray", re.compile(r"\(job \d{8}-\d{6}-\w+\) (queued|running) on ray as dlguide-"))
    store = JobStore()
    (job,) = store.list_jobs()
    assert job.executor == "ray" and job.external_id.startswith("dlguide-")
    wait_for(lambda: store.last_step(job.id), timeout=120, what="the Ray job's first step in the store")
    assert cancel_until_ended(store, job.id) == "cancelled" and store.get(job.id).checkpoint
