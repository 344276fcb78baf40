"""Booth core: idle timing, attract rotation, timed predictions and the backend choice."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from PIL import Image

from dlguide_core import booth, booth_photos
from dlguide_core.errors import DlguideError
from dlguide_core.vision.classify import classify_images, forward_slot, predict_logits
from dlguide_core.vision.models import LoadedModel, build_model
from dlguide_core.vision.presets import EvalPreset
from dlguide_core.vision.samples import bundled_samples


@pytest.fixture(scope="module")
def small() -> LoadedModel:
    torch.manual_seed(0)
    model = build_model("inception_v3", num_classes=6).eval()
    names = tuple(f"class {i}" for i in range(6))
    return LoadedModel(model, "inception_v3", {"num_classes": 6}, names, EvalPreset(resize=160, crop=160), "test",
                       False, "t", "small-test")


def eager(loaded: LoadedModel) -> booth.Predictor:
    return booth.Predictor("eager", "CPU", lambda batch: predict_logits(loaded, batch))


@pytest.mark.parametrize(("raw", "expected"), [(None, 60.0), ("5", 5.0), ("0.5", 0.5), ("0", 60.0), ("-3", 60.0),
                                               ("soon", 60.0)])
def test_idle_seconds_from_env(monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: float) -> None:
    if raw is None:
        monkeypatch.delenv("DLGUIDE_KIOSK_IDLE_S", raising=False)
    else:
        monkeypatch.setenv("DLGUIDE_KIOSK_IDLE_S", raw)
    assert booth.idle_seconds() == expected


def test_idle_countdown() -> None:
    assert booth.seconds_left(100.0, 110.0, 60.0) == 50.0
    assert booth.seconds_left(100.0, 159.9, 60.0) > 0.0
    assert booth.seconds_left(100.0, 160.0, 60.0) == 0.0  # due: the page resets
    assert booth.seconds_left(100.0, 500.0, 60.0) == 0.0


def test_attract_rotation() -> None:
    shown = [booth.attract_index(t, 3, period_s=5.0) for t in (0.0, 4.9, 5.0, 10.0, 15.0, 20.0)]
    assert shown == [0, 0, 1, 2, 0, 1]
    assert booth.attract_index(123.0, 0) == 0


def test_predict_timed_matches_classify(small: LoadedModel) -> None:
    image = Image.new("RGB", (200, 180), (30, 140, 220))
    result = booth.predict_timed(small, eager(small), image, k=5)
    assert [p.index for p in result.top] == [p.index for p in classify_images(small, [image], k=5)[0]]
    assert result.latency_ms > 0 and result.backend == "eager" and result.device == "CPU"


def test_a_photo_answered_from_its_bytes_matches_classify(small: LoadedModel) -> None:
    """booth_photos.answer_photo (the booth's path: decode and preprocess on the image threads, the forward in the
    worker) gives classify's top-5 for the same photo, and its answer as the booth's HTTP route sends it (the keys
    README's "Booth mode" names); a file that is no image is one line, and leaves the image threads serving the
    next."""
    import io
    import json

    from dlguide_core.vision.images import load_image

    image = Image.new("RGB", (900, 700), (30, 140, 220))
    image.paste((240, 200, 10), (300, 200, 700, 500))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=92)
    data = buffer.getvalue()
    result = booth_photos.answer_photo(small, eager(small), data, "shot.jpg")
    expected = classify_images(small, [load_image(data, min_side=small.preset.resize)], k=5)[0]
    assert [p.index for p in result.top] == [p.index for p in expected]
    assert [p.prob for p in result.top] == pytest.approx([p.prob for p in expected], abs=1e-5)
    assert result.latency_ms > 0 and result.batch_size == 1
    sent = json.loads(json.dumps(booth_photos.answer_json(result)))
    assert list(sent) == ["label", "prob", "top", "latency_ms", "queued_ms", "batch_size", "backend", "device"]
    assert sent["label"] == expected[0].label and sent["backend"] == "eager" and sent["device"] == "CPU"
    assert [row["index"] for row in sent["top"]] == [p.index for p in expected]
    assert [list(row) for row in sent["top"]] == [["label", "prob", "index"]] * 5
    with pytest.raises(DlguideError, match="junk.png") as bad:
        booth_photos.answer_photo(small, eager(small), b"not an image", "junk.png")
    assert "\n" not in str(bad.value)
    assert booth_photos.answer_photo(small, eager(small), data, "again.jpg").top == result.top


def test_a_heat_map_from_a_photos_bytes_is_a_jpeg_of_what_the_model_saw(small: LoadedModel) -> None:
    """booth_photos.heatmap_jpeg: the Grad-CAM of the asked class over the model's crop, run in the worker; a class
    the model does not have is one line, not an IndexError."""
    import io

    buffer = io.BytesIO()
    Image.new("RGB", (400, 300), (200, 60, 20)).save(buffer, format="JPEG")
    runner = eager(small)
    jpeg = booth_photos.heatmap_jpeg(small, runner, buffer.getvalue(), "shot.jpg", 2)
    shown = Image.open(io.BytesIO(jpeg))
    assert shown.format == "JPEG" and shown.size == (small.preset.crop, small.preset.crop)
    with pytest.raises(DlguideError, match="class 6 is not one of the model's 6 classes"):
        booth_photos.heatmap_jpeg(small, runner, buffer.getvalue(), "shot.jpg", 6)


def test_latency_excludes_time_queued_behind_another_visitor(small: LoadedModel) -> None:
    runner = booth.Predictor("instant", "CPU", lambda batch: torch.zeros(batch.shape[0], 6))
    image = Image.new("RGB", (160, 160), (200, 20, 20))
    start = time.perf_counter()
    held = threading.Event()

    def other_visitor() -> None:  # another forward holds the process's only forward slot for 4 s
        with forward_slot():
            held.set()
            time.sleep(4.0)
    threading.Thread(target=other_visitor).start()
    assert held.wait(30)
    queued = booth.predict_timed(small, runner, image)
    assert time.perf_counter() - start >= 3.9
    assert queued.latency_ms < 3000  # the wait is not this prediction's latency (a small forward: far less)
    assert queued.queued_ms >= 3000 and queued.batch_size == 1  # it is reported apart


def test_attract_items_cover_the_bundled_samples(small: LoadedModel) -> None:
    items = booth.attract_items(small, eager(small), k=3)
    assert [i.name for i in items] == list(bundled_samples())
    assert all(len(i.top) == 3 and i.image.mode == "RGB" for i in items)


def test_backend_choice(monkeypatch: pytest.MonkeyPatch, small: LoadedModel) -> None:
    monkeypatch.delenv("DLGUIDE_KIOSK_BACKEND", raising=False)
    assert booth.backend_choice() == "auto"
    monkeypatch.setenv("DLGUIDE_KIOSK_BACKEND", "torch")
    runner = booth.fastest_predictor(small)
    assert runner.backend.startswith("PyTorch") and runner.device.startswith("CPU")
    batch = torch.zeros(1, 3, 160, 160)
    assert torch.equal(runner.logits(batch), predict_logits(small, batch))
    monkeypatch.setenv("DLGUIDE_KIOSK_BACKEND", "warp-drive")
    with pytest.raises(DlguideError, match="auto or one of"):
        booth.fastest_predictor(small)


def test_choice_rule_is_stated_from_the_constants_the_booth_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    from dlguide_core.inference import choice

    rule = booth.choice_rule()
    assert "lowest p50 wins" in rule and "ONNX Runtime int8" in rule and "MIGraphX (CPU)" in rule
    assert f"{booth.RANKING_WARMUP} warm-up + {booth.RANKING_ITERS} runs" in rule and "99%" in rule
    monkeypatch.setattr(choice, "AGREEMENT_MIN", 0.95)
    assert "at least 95%" in booth.choice_rule()


def test_int8_competes_only_where_its_top1_agrees_with_eager(monkeypatch: pytest.MonkeyPatch, cifar) -> None:
    import sys

    from dlguide_core.inference import choice

    monkeypatch.delenv("DLGUIDE_KIOSK_BACKEND", raising=False)
    monkeypatch.setitem(sys.modules, "migraphx", None)  # contenders: ORT int8 alone
    monkeypatch.setitem(sys.modules, "zentorch", None)  # (zentorch's turn: tests/inference/test_backend_zentorch.py)
    monkeypatch.setattr(booth, "measure_p50_ms", lambda b, _batch: 1.0 if b.options.precision == "int8" else 9.0)
    monkeypatch.setattr(booth, "measure_once_ms", lambda b, _batch: 1.0 if b.options.precision == "int8" else 9.0)
    monkeypatch.setattr(choice, "top1_agreement", lambda _loaded, _backend, photos: 0.985)
    backend, why = booth.fastest_measured(cifar)
    assert (backend.name, backend.options.precision) == ("onnxruntime", "fp32")
    assert "left out: ONNX Runtime int8 (top-1 agrees on 98.5% of" in why
    monkeypatch.setattr(choice, "top1_agreement", lambda _loaded, _backend, photos: 0.99)
    runner = booth.fastest_predictor(cifar)
    assert runner.backend == "ONNX Runtime int8 · CPUExecutionProvider" and "ONNX Runtime int8 1.0 ms" in runner.why
    assert runner.logits(torch.zeros(1, 3, 32, 32)).shape == (1, 10)


def test_the_booth_weights_are_imagenet_when_cached_else_the_untrained_model(fake_imagenet, tmp_path, monkeypatch):
    from dlguide_core.booth import booth_weights

    assert booth_weights() == "imagenet"
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty"))
    said = []
    assert booth_weights() == "none"  # the page: never a download
    assert booth_weights(fetch=True, say=said.append) == "none"  # serve.py, offline: tries, says so
    assert "downloading" in said[0] and "untrained" in said[-1]
