"""Browser: start a small job from the Train page and watch its chart grow."""

from __future__ import annotations

import re

import pytest

from dlguide_core.datasets import write_toy_dataset


@pytest.mark.browser
@pytest.mark.slow
def test_start_a_job_and_see_the_chart_grow(app_server, browser_page, tmp_path) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=40, val_per_class=2)
    url = app_server(DLGUIDE_DATA_ROOTS=str(tmp_path / "roots"))
    page = browser_page
    page.goto(f"{url}/train")
    page.get_by_text("Recipe").first.wait_for()
    page.get_by_test_id("stSelectbox").filter(has_text="Recipe").first.click()
    page.get_by_role("option", name=re.compile("^cifar_net")).click()
    form = page.get_by_test_id("stForm").first
    form.get_by_label("Epochs").first.fill("3")
    form.get_by_label("Loader workers").first.fill("0")
    form.get_by_role("button", name="Start training").click()
    page.get_by_text(re.compile(r"Job \d{8}-\d{6}-\w+ (running|queued)")).wait_for(timeout=60_000)
    caption = page.get_by_text(re.compile(r"[\d,]+ steps stored"))
    caption.wait_for(timeout=90_000)
    first = int(re.search(r"([\d,]+) steps stored", caption.inner_text()).group(1).replace(",", ""))
    page.wait_for_function(
        """(n) => [...document.querySelectorAll('p, div')].some(e => {
               const m = /([\\d,]+) steps stored/.exec(e.textContent || '');
               return m && parseInt(m[1].replace(/,/g, '')) > n; })""", arg=first, timeout=90_000)
    assert page.locator(".js-plotly-plot").count() >= 3
