"""Browser: evaluate a finished toy job from the Train page and see its confusion heatmap."""

from __future__ import annotations

import pytest

from dlguide_core.jobs.store import JobStore
from tests.support.jobs import finished_job
from tests.support.toy_data import write_toy_dataset


@pytest.mark.browser
@pytest.mark.slow
def test_evaluate_a_finished_job_and_see_the_heatmap(app_server, browser_page, tmp_path) -> None:
    data = write_toy_dataset(tmp_path / "roots" / "toy", classes=3, per_class=1, val_per_class=4)
    store = JobStore()
    finished_job(store, data, 0.01, 40.0)
    store.close()
    url = app_server(DLGUIDE_DATA_ROOTS=str(tmp_path / "roots"))
    page = browser_page
    page.goto(f"{url}/train")
    page.get_by_text("Evaluate a finished job").first.click(timeout=90_000)
    button = page.locator(".st-key-train_eval_run button")
    button.wait_for(timeout=60_000)
    button.click()
    try:
        page.locator(".js-plotly-plot .heatmaplayer .hm").first.wait_for(timeout=120_000)
    except Exception:  # say what the page showed instead of a bare timeout
        pytest.fail("no heatmap; the page said:\n" + page.locator("[data-testid=stMain]").first.inner_text()[-3000:])
    page.get_by_text("Confusion matrix (rows: true class").first.wait_for(timeout=30_000)  # the chart's title
    page.get_by_text("Top confusions").first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Download confusion matrix (CSV)").wait_for(timeout=30_000)
