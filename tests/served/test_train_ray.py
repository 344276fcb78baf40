"""Browser: Run on = Ray on the Train page submits the job through Ray's job API to a real local head; the
page says where it runs; the job streams steps into the store; cancel stops it with a checkpoint."""

from __future__ import annotations

import re

import pytest

from dlguide_core.jobs.executors import tracking
from dlguide_core.jobs.executors.registry import get_executor
from dlguide_core.jobs.store import JobStore
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for


@pytest.mark.browser
@pytest.mark.slow
def test_run_on_ray_from_the_train_page(ray_head, app_server, browser_page, tmp_path) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=6, val_per_class=1)
    url = app_server(DLGUIDE_DATA_ROOTS=str(tmp_path / "roots"), RAY_ADDRESS=ray_head.address)
    page = browser_page
    page.goto(f"{url}/train")
    page.get_by_text("Recipe").first.wait_for()
    page.get_by_test_id("stSelectbox").filter(has_text="Recipe").first.click()
    page.get_by_role("option", name=re.compile("^cifar_net")).click()
    run_on = page.locator(".st-key-train_cifar_net_run_on")
    run_on.wait_for(timeout=60_000)
    run_on.get_by_text("Ray", exact=True).click()  # offered: ray importable and the head answers
    page.locator(".st-key-train_cifar_net_epochs input").fill("500")  # runs until cancelled below
    page.locator(".st-key-train_cifar_net_workers input").fill("0")
    page.locator(".st-key-train_cifar_net_start button").click()
    started = page.get_by_text(re.compile(r"Job \d{8}-\d{6}-\w+ (queued|running) on ray as dlguide-"))
    try:
        started.wait_for(timeout=90_000)
    except Exception:  # say what the page showed instead of a bare timeout
        pytest.fail("no job submitted; the page said:\n" + page.locator("[data-testid=stMain]")
                    .first.inner_text()[-3000:])
    store = JobStore()
    (job,) = store.list_jobs()
    assert job.executor == "ray" and job.external_id.startswith("dlguide-")
    wait_for(lambda: store.last_step(job.id), timeout=120, what="the Ray job's first step in the store")
    get_executor("ray").cancel(store, store.get(job.id))

    def ended():
        tracking.sync(store)
        return store.get(job.id).status not in ("queued", "running")

    wait_for(ended, timeout=120, every=0.5, what="the cancelled Ray job to end")
    assert store.get(job.id).status == "cancelled" and store.get(job.id).checkpoint
