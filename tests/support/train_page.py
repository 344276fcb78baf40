"""The Train page driven in Chromium for the cluster executors: start a long cifar_net run on a chosen "Run on",
and cancel a scheduler's job until it has ended."""

from __future__ import annotations

import re

import pytest

from dlguide_core.jobs.executors import tracking
from dlguide_core.jobs.executors.registry import get_executor
from dlguide_core.jobs.store import JobStore
from tests.support.servers import AppURL
from tests.support.waiting import wait_for


def start_long_run(page, url: AppURL, run_on: str, started: re.Pattern, ready_key: str | None = None) -> None:
    """Pick cifar_net, Run on `run_on`, 1000 epochs at batch 1 (it runs until cancelled), Start; wait for the
    `started` line.
    `ready_key`: a widget key the executor's fields show once ready (Slurm's partitions from sinfo)."""
    page.goto(url.link("/train"))
    page.get_by_text("Recipe").first.wait_for()
    page.get_by_test_id("stSelectbox").filter(has_text="Recipe").first.click()
    page.get_by_role("option", name=re.compile("^cifar_net")).click()
    choice = page.locator(".st-key-train_cifar_net_run_on")
    choice.wait_for(timeout=60_000)
    choice.get_by_text(run_on, exact=True).click()
    if ready_key:
        page.locator(f".st-key-{ready_key}").wait_for(timeout=60_000)
    settled_on_scheduler(page)
    page.locator(".st-key-train_cifar_net_epochs input").fill("1000")  # the form's most, at batch 1: 1000s of steps
    page.locator(".st-key-train_cifar_net_batch input").fill("1")
    page.locator(".st-key-train_cifar_net_workers input").fill("0")
    page.locator(".st-key-train_cifar_net_start button").click()
    try:
        page.get_by_text(started).wait_for(timeout=90_000)
    except Exception:  # say what the page showed instead of a bare timeout
        pytest.fail("no job submitted; the page said:\n" + page.locator("[data-testid=stMain]")
                    .first.inner_text()[-3000:])


ONE_FORM = ("() => !document.querySelector('[data-stale=\"true\"]')"
            " && document.querySelectorAll('.st-key-train_cifar_net_epochs input').length === 1")


def settled_on_scheduler(page) -> None:
    """Wait for the rerun that a scheduler choice starts to end. The local-only "Devices and machines" section
    goes, so the form moves and is drawn anew; until the run ends the old form stays on the page (stale) beside
    the new one, and a fill could land in either."""
    page.get_by_text(re.compile(r"^Devices and machines")).wait_for(state="detached", timeout=60_000)
    page.wait_for_function(ONE_FORM, timeout=60_000)


def cancel_until_ended(store: JobStore, job_id: str) -> str:
    """Cancel through the job's executor, sync with its scheduler until the job has ended; its final status."""
    job = store.get(job_id)
    get_executor(tracking.executor_of(job)).cancel(store, job)

    def ended():
        tracking.sync(store)
        return store.get(job_id).status not in ("queued", "running")

    wait_for(ended, timeout=120, every=0.5, what=f"the cancelled {job.executor} job to end")
    return store.get(job_id).status
