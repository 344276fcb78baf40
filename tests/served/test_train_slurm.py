"""Browser: Run on = Slurm on the Train page submits a batch job to a real Slurm; its batch script is one click
away; cancel ends it."""

from __future__ import annotations

import re

import pytest

from dlguide_core.jobs.store import JobStore
from tests.support.toy_data import write_toy_dataset
from tests.support.train_page import cancel_until_ended, start_long_run


@pytest.mark.browser
@pytest.mark.slow
def test_run_on_slurm_from_the_train_page(slurm_cluster, app_server, browser_page, tmp_path) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=6, val_per_class=1)
    url = app_server(DLGUIDE_DATA_ROOTS=str(tmp_path / "roots"))
    page = browser_page
    start_long_run(page, url, "Slurm", re.compile(r"\(job \d{8}-\d{6}-\w+\) queued on slurm as \d+"),
                   ready_key="train_cifar_net_slurm_partition")  # partitions from sinfo
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
    assert cancel_until_ended(store, job.id) == "cancelled"
