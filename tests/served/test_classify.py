"""A real browser (Debian chromium via Playwright) uploads an image and sees the top-5."""

import pytest

from dlguide_core.vision.classify import classify_sources
from dlguide_core.vision.models import load_model

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_upload_shows_top5_matching_the_core(app_server, browser_page, fake_imagenet, sample_jpeg, tmp_path):
    """Classify's top-5 is the core's; and the full app's own Booth page (/kiosk, behind the server's token) answers
    the same photo with the same top-5 over the booth's HTTP route, its requests let in by the token's cookie."""
    url = app_server(DLGUIDE_KIOSK_BACKEND="torch")
    page = browser_page
    page.goto(url.link())
    page.get_by_text("Classify with Inception v3").wait_for(timeout=120_000)
    uploader = page.locator('.st-key-classify_upload input[type="file"]')
    uploader.wait_for(state="attached", timeout=120_000)  # drawn once the model has loaded
    uploader.set_input_files(str(sample_jpeg))
    page.locator('[data-testid="stPlotlyChart"]').first.wait_for(timeout=120_000)
    page.locator(".ytick text").nth(4).wait_for()
    ticks = page.locator('[data-testid="stPlotlyChart"] .ytick text')
    labels = [t.strip() for t in ticks.evaluate_all("els => els.map(e => e.textContent)")]
    page.screenshot(path=str(tmp_path / "classify.png"), full_page=True)

    expected = classify_sources(load_model("imagenet", device="cpu"), [("cat", str(sample_jpeg))])[0].top
    assert len(labels) == 5
    assert sorted(labels) == sorted(p.label for p in expected)
    assert page.get_by_text("Traceback").count() == 0

    page.goto(url.link("/kiosk"))
    page.get_by_text("Show the camera something").wait_for(timeout=120_000)
    page.get_by_role("tab", name="Upload").click()
    page.locator(".booth-screen input[type=file]").set_input_files(str(sample_jpeg))
    page.get_by_text("I think it's a").wait_for(timeout=120_000)
    shown = page.locator(".booth-answer .booth-label").evaluate_all("els => els.map(e => e.textContent)")
    assert shown == [p.label for p in expected]
