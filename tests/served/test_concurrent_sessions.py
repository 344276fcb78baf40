"""Two visitors at once on a `make run` server: one opens the booth on a cold server (its ONNX export runs),
the other classifies on Classify meanwhile. Issue 18: the export ran in the serving process and the second
session showed "This app has encountered an error" (the exporter patches nn.Module.__call__ process-wide)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CRASH = "This app has encountered an error"


def test_a_booth_export_and_a_classification_overlap(app_server, browser, fake_imagenet: Path, sample_jpeg: Path,
                                                      tmp_path: Path) -> None:
    url = app_server(DLGUIDE_KIOSK_BACKEND="onnxruntime")  # the booth exports to ONNX on its first visit
    booth = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    visitor = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    try:
        visitor.goto(url.link())
        uploader = visitor.locator('.st-key-classify_upload input[type="file"]')
        uploader.wait_for(state="attached", timeout=120_000)  # the model is loaded: classifying is quick now
        booth.goto(url.link("/kiosk"))  # starts the export
        booth.get_by_text("Preparing the booth model").wait_for(timeout=60_000)
        charts = visitor.locator('[data-testid="stPlotlyChart"]')
        classified = 0
        while classified < 3 and booth.get_by_text("Preparing the booth model").count():
            photo = tmp_path / f"photo-{classified}.jpg"  # a new name: the same file again fires no change
            shutil.copyfile(sample_jpeg, photo)
            uploader.set_input_files(str(photo))  # one more file: the rerun classifies them all
            classified += 1
            charts.nth(classified - 1).or_(visitor.get_by_text(CRASH)).first.wait_for(timeout=120_000)
            assert visitor.get_by_text(CRASH).count() == 0, "the classifying session crashed during the export"
        booth.get_by_text("Show the camera something").wait_for(timeout=240_000)
        visitor.screenshot(path=str(tmp_path / "visitor.png"), full_page=True)
        assert classified >= 1  # the booth was still exporting when the first classification began
        assert visitor.get_by_text(CRASH).count() == 0 and booth.get_by_text(CRASH).count() == 0
        assert visitor.get_by_text("Traceback").count() == 0
    finally:
        visitor.screenshot(path=str(tmp_path / "visitor-end.png"), full_page=True)
        booth.screenshot(path=str(tmp_path / "booth-end.png"), full_page=True)
        booth.context.close()
        visitor.context.close()
