"""Browser: evaluate a finished toy job from the Train page and see its confusion heatmap."""

from __future__ import annotations

import os
import re

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
    page.goto(url.link("/train"))
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



def _pick_weights(page, label: str) -> None:
    page.locator(".st-key-classify_weights").click()
    option = page.get_by_role("option", name=label)
    try:
        option.wait_for(timeout=5_000)
    except Exception:  # the list closed under a rerun: open it again
        page.locator(".st-key-classify_weights").click()
    option.click()


@pytest.mark.browser
@pytest.mark.slow
def test_an_evaluation_tick_after_another_weights_pick_keeps_the_page(app_server, browser_page, tmp_path) -> None:
    """An evaluation job's 1 s progress timer fires while the user's pick of other weights is being run on
    Classify, and reaches the server once that run is over. Classify ends its runs with st.stop() (no image yet),
    so Streamlit still held the progress fragment and ran it once more, where it was: third in the "Evaluate these
    weights" expander, which now held one line (untrained weights are not evaluated). The browser, told to draw
    past the end of the expander, blanked the whole page ("Bad delta path index 2 (should be between [0, 1])")."""
    from playwright.sync_api import expect

    from dlguide_core.jobs import queue
    from dlguide_core.jobs.evaluation_job import EVALUATE_RECIPE, EvaluateConfig
    from tests.support.late_tick import LateTick

    data = write_toy_dataset(tmp_path / "roots" / "toy", classes=3, per_class=1, val_per_class=4)
    store = JobStore()
    trained = finished_job(store, data, 0.01, 40.0)
    checkpoint = str(store.get(trained).checkpoint)
    evaluating = queue.submit(store, EVALUATE_RECIPE, EvaluateConfig(weights=checkpoint, data=str(data)),
                              claim_pid=os.getpid())  # running in this process: its progress polls
    url = app_server(DLGUIDE_DATA_ROOTS=str(tmp_path / "roots"))
    page = browser_page
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)[:200]))
    late = LateTick(page)
    progress = page.get_by_text(f"Evaluation job {evaluating.id}: 0/")
    try:
        page.goto(url.link())  # Classify, on ImageNet weights that are not there: the page says what to pick
        page.get_by_text("Meanwhile, pick").wait_for(timeout=90_000)
        _pick_weights(page, re.compile(re.escape(f"({trained})")))  # "checkpoint of <run> (<job id>)"
        progress.wait_for(state="attached", timeout=60_000)
        late.arm()
        _pick_weights(page, "none (untrained, random init)")
        late.release(1500)  # the pick's run is over by then
        page.get_by_text("Untrained weights score chance").wait_for(state="attached", timeout=60_000)
        page.wait_for_timeout(1000)  # the late tick's run
        assert errors == [], f"the page broke after another weights pick: {errors}"
        expect(page.get_by_text("Untrained weights score chance")).to_be_attached()
        expect(progress).to_have_count(0)
    finally:
        store.finish(evaluating.id, "cancelled")
        store.close()
