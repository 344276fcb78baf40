"""serve.py's warm-up of the full app (issue 18, point 2), in this process: after warm_app() the default model
sits in the very cache entry the Classify page reads, so the first visitor's run loads nothing. (The time a first
visitor waits is bench/bench_first_paint.py's business: no timing here.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import serve
import ui.cache
from dlguide_core import devices


@pytest.fixture
def counted_loads(monkeypatch):
    calls: list[str] = []
    real = ui.cache.load_model

    def load_model(weights: str):
        calls.append(weights)
        return real(weights)

    monkeypatch.setattr(ui.cache, "load_model", load_model)
    ui.cache.cached_model.clear()
    yield calls
    ui.cache.cached_model.clear()


def test_warm_app_fills_the_pages_model_cache_and_the_device_probe(fake_imagenet: Path, counted_loads) -> None:
    devices.tensorflow_info.cache_clear()
    serve.warm_app()
    assert counted_loads == ["imagenet"]
    loaded = ui.cache.get_model("imagenet")  # what the Classify page calls on the first visit
    assert counted_loads == ["imagenet"], "the page's call must hit the warmed entry"
    assert loaded.trained and ui.cache.get_model("imagenet") is loaded
    # The sidebar's probe only: TensorFlow's (a child process importing TF) is the Devices page's business.
    assert devices.tensorflow_info.cache_info().currsize == 0


def test_without_cached_weights_nothing_is_downloaded_or_loaded(counted_loads, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty_torch_home"))  # the page offers the download itself
    serve.warm_app()
    assert counted_loads == []
