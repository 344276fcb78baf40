"""Browser: Run on = Slurm on the Train page submits a batch job to a real Slurm; its batch script is one click
away; cancel ends it."""

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
def test_run_on_slurm_from_the_train_page(slurm_cluster, app_server, browser_page, tmp_path) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=6, val_per_class=1)
    url = app_server(DLGUIDE_DATA_ROOTS=str(tmp_path / "roots"))
    page = browser_page
    page.goto(f"{url}/train")
    page.get_by_text("Recipe").first.wait_for()
    page.get_by_test_id("stSelectbox").filter(has_text="Recipe").first.click()
    page.get_by_role("option", name=re.compile("^cifar_net")).click()
    run_on = page.locator(".st-key-train_cifar_net_run_on")
    run_on.wait_for(timeout=60_000)
    run_on.get_by_text("Slurm", exact=True).click()
    page.locator(".st-key-train_cifar_net_slurm_partition").wait_for(timeout=60_000)  # partitions from sinfo
    page.locator(".st-key-train_cifar_net_epochs input").fill("500")  # runs until cancelled below
    page.locator(".st-key-train_cifar_net_workers input").fill("0")
    page.locator(".st-key-train_cifar_net_start button").click()
    started = page.get_by_text(re.compile(r"Job \d{8}-\d{6}-\w+ queued on slurm as \d+"))
    try:
        started.wait_for(timeout=90_000)
    except Exception:  # say what the page showed instead of a bare timeout
        pytest.fail("no job submitted; the page said:\n" + page.locator("[data-testid=stMain]")
                    .first.inner_text()[-3000:])
    store = JobStore()
    (job,) = store.list_jobs()
    assert job.executor == "slurm" and job.external_id and job.config["nproc_per_node"] == 1
    assert (job.job_dir / "sbatch.sh").is_file()
    script = page.get_by_text(re.compile(r"#SBATCH --job-name=dlguide-")).first
    for attempt in range(4):  # one click away (a click during the job table's 2 s rerun may be lost: click again)
        page.get_by_text("Log and batch script").first.click()
        try:
            script.wait_for(timeout=15_000)
            break
        except Exception:
            if attempt == 3:
                raise
    # Curves while it runs are the CLI tests' business (tests/jobs/executors/test_slurm.py); here, stop it.
    get_executor("slurm").cancel(store, store.get(job.id))

    def ended():
        tracking.sync(store)
        return store.get(job.id).status not in ("queued", "running")

    wait_for(ended, timeout=120, every=0.5, what="the cancelled Slurm job to end")
    assert store.get(job.id).status == "cancelled"
