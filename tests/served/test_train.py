"""Browser: start a small job from the Train page and watch its chart grow."""

from __future__ import annotations

import re

import pytest

from dlguide_core.jobs.store import JobError, JobStore
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for


@pytest.fixture
def cancel_jobs_after():
    """The job is a detached process: ask it to stop when the test ends, pass or fail."""
    yield
    store = JobStore()
    try:
        for job in store.list_jobs():
            try:
                store.request_cancel(job.id)
            except JobError:  # already ended
                continue
        try:  # let it stop, so it does not load the tests after it
            wait_for(lambda: not any(j.status == "running" for j in store.list_jobs()), timeout=60, every=0.5)
        except AssertionError:
            pass  # teardown: the test's own outcome stands
    finally:
        store.close()


@pytest.mark.browser
@pytest.mark.slow
def test_start_a_job_and_see_the_chart_grow(app_server, browser_page, tmp_path, cancel_jobs_after) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=40, val_per_class=2)
    url = app_server(DLGUIDE_DATA_ROOTS=str(tmp_path / "roots"))
    page = browser_page
    page.goto(url.link("/train"))
    page.get_by_text("Recipe").first.wait_for()
    page.get_by_test_id("stSelectbox").filter(has_text="Recipe").first.click()
    page.get_by_role("option", name=re.compile("^cifar_net")).click()
    # Wait for the rerun that swaps in cifar_net's own form: filling the previous recipe's form
    # while Streamlit reruns is a race a loaded CI machine loses.
    epochs = page.locator(".st-key-train_cifar_net_epochs input")
    epochs.wait_for(timeout=60_000)
    epochs.fill("20")  # long enough that growth is seen before it ends; cancelled below
    page.locator(".st-key-train_cifar_net_workers input").fill("0")
    page.locator(".st-key-train_cifar_net_start button").click()
    started = page.get_by_text(re.compile(r"\(job \d{8}-\d{6}-\w+\) (running|is queued)"))  # named first
    try:
        started.wait_for(timeout=90_000)
    except Exception:  # say what the page showed instead of a bare timeout
        pytest.fail("no job started; the page said:\n" + page.locator("section.main, [data-testid=stMain]")
                    .first.inner_text()[-3000:])
    caption = page.get_by_text(re.compile(r"[\d,]+ steps stored"))
    caption.wait_for(timeout=90_000)
    first = int(re.search(r"([\d,]+) steps stored", caption.inner_text()).group(1).replace(",", ""))
    page.wait_for_function(
        """(n) => [...document.querySelectorAll('p, div')].some(e => {
               const m = /([\\d,]+) steps stored/.exec(e.textContent || '');
               return m && parseInt(m[1].replace(/,/g, '')) > n; })""", arg=first, timeout=90_000)
    page.locator(".js-plotly-plot").nth(2).wait_for(timeout=30_000)  # loss, lr and images/s at least
