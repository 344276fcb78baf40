"""The booth in a real browser: a visitor uploads, sees the top-5 and the heatmap, walks away; URL tricks fail."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image, ImageDraw
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TITLE = "What does the AI see?"
ATTRACT = "Show the camera something, or upload a photo!"


def photo(path: Path) -> Path:
    img = Image.new("RGB", (400, 300), (90, 160, 60))
    ImageDraw.Draw(img).ellipse([120, 60, 280, 220], fill=(230, 200, 30))
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG")
    path.write_bytes(buffer.getvalue())
    return path


def test_visitor_flow_and_idle_reset(app_server, browser_page, fake_imagenet: Path, tmp_path: Path) -> None:
    page = browser_page
    url = app_server(DLGUIDE_KIOSK="1", DLGUIDE_KIOSK_IDLE_S="12", DLGUIDE_KIOSK_BACKEND="torch")
    page.goto(url)
    page.get_by_text(ATTRACT).wait_for(timeout=120_000)  # the attract view (a cold server loads the model first)
    page.locator(".kiosk-row").nth(4).wait_for()
    assert page.locator(".kiosk-row").count() == 5
    assert page.get_by_text("Classify with Inception v3").count() == 0

    page.get_by_text("Upload", exact=True).click()
    page.locator("input[type=file]").set_input_files(str(photo(tmp_path / "visitor.jpg")))
    page.get_by_text("I think it's a").wait_for()
    page.locator(".kiosk-row").nth(4).wait_for()
    assert page.locator(".kiosk-row").count() == 5
    page.get_by_text("This prediction took").wait_for()
    page.get_by_text("What the model sees", exact=False).wait_for()

    page.get_by_text("Where did the model look?").click()
    page.get_by_text("Grad-CAM for", exact=False).wait_for()
    page.screenshot(path=str(tmp_path / "heatmap.png"), full_page=True)

    # No more taps: after DLGUIDE_KIOSK_IDLE_S the screen clears itself back to the attract view.
    page.get_by_text(ATTRACT).wait_for(timeout=40_000)
    for gone in ("I think it's a", "visitor.jpg", "Grad-CAM for", "Your photo"):  # stale elements go at run end
        expect(page.get_by_text(gone, exact=False)).to_have_count(0, timeout=20_000)
    expect(page.locator("[data-testid=stImage]")).to_have_count(1)  # only the attract view's sample


@pytest.mark.parametrize("first", ["/devices", "/ui", "/cache", "/tensorflow"])
def test_url_tricks_land_on_the_booth(app_server, browser_page, first: str) -> None:
    """`first` is the fresh server's very first request: a page, or the ui package or one of its modules."""
    page = browser_page
    url = app_server(DLGUIDE_KIOSK="1", DLGUIDE_KIOSK_BACKEND="torch")
    for path in (first, "/train", "/classify", "/?page=devices", "/devices?weights=none", "/common"):
        page.goto(url + path)
        page.get_by_text(TITLE).wait_for(timeout=120_000)
        for hidden in ("Classify with Inception v3", "Devices", "Train", "Compiled inference"):
            assert page.get_by_role("heading", name=hidden, exact=True).count() == 0, (path, hidden)
        assert page.get_by_text("Weights", exact=True).count() == 0, path
