"""The process-wide gate on live forwards (issue 18, point 3): DLGUIDE_MAX_FORWARDS bounds how many model
forwards run at once, whoever asks (Classify's predict_logits, Grad-CAM, the booth)."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from PIL import Image
from torch import nn

from dlguide_core import booth
from dlguide_core.vision import classify
from dlguide_core.vision.classify import forward_gate, forward_slot, predict_logits
from dlguide_core.vision.gradcam import grad_cam
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import EvalPreset


class Counting(nn.Module):
    """A tiny net that records how many of its forwards overlap (each waits up to 0.2 s for 6 at once)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 3)
        self.lock, self.running, self.most = threading.Lock(), 0, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        deadline = time.monotonic() + 0.2  # wait (briefly) for company: overlap, however slow threads start
        while self.running < 6 and time.monotonic() < deadline:
            time.sleep(0.005)
        with self.lock:
            self.running -= 1
        return self.fc(self.features(x).mean(dim=(2, 3)))


def loaded_counting() -> LoadedModel:
    return LoadedModel(Counting().eval(), "cifar_net", {}, ("a", "b", "c"), EvalPreset(resize=16, crop=16), "test",
                       False, "t", "gate-test")


@pytest.fixture(autouse=True)
def fresh_gate():
    forward_gate.cache_clear()  # the gate reads DLGUIDE_MAX_FORWARDS once per process
    yield
    forward_gate.cache_clear()


def most_at_once(loaded: LoadedModel, calls: int) -> int:
    batch = torch.randn(2, 3, 16, 16)
    threads = [threading.Thread(target=predict_logits, args=(loaded, batch)) for _ in range(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return loaded.model.most


@pytest.mark.parametrize(("raw", "slots"), [(None, classify.DEFAULT_MAX_FORWARDS), ("2", 2), ("zero", 1)])
def test_concurrent_forwards_never_exceed_the_slots(monkeypatch, raw, slots):
    if raw is None:
        monkeypatch.delenv("DLGUIDE_MAX_FORWARDS", raising=False)
    else:
        monkeypatch.setenv("DLGUIDE_MAX_FORWARDS", raw)
    assert forward_gate().slots == slots
    assert most_at_once(loaded_counting(), 6) == slots


def test_a_gated_forward_inside_another_takes_no_second_slot():
    inner = loaded_counting()

    class Outer(nn.Module):  # e.g. a backend dressed as a model, run through predict_logits
        def __init__(self) -> None:
            super().__init__()
            self.anchor = nn.Parameter(torch.empty(0), requires_grad=False)  # LoadedModel.device: the CPU

        def forward(self, x):
            return predict_logits(inner, x)

    outer = LoadedModel(Outer(), "cifar_net", {}, ("a", "b", "c"), inner.preset, "test", False, "t", "outer")
    logits: list[torch.Tensor] = []
    done = threading.Thread(target=lambda: logits.append(predict_logits(outer, torch.randn(1, 3, 16, 16))))
    done.start()
    done.join(timeout=10)
    assert not done.is_alive(), "a nested forward waited for the slot its own thread holds"
    assert logits and logits[0].shape == (1, 3)


@pytest.mark.parametrize("forward", ["booth", "grad_cam"])
def test_the_booth_and_grad_cam_wait_for_the_gate(monkeypatch, forward):
    monkeypatch.setenv("DLGUIDE_MAX_FORWARDS", "1")
    loaded = loaded_counting()
    image = Image.new("RGB", (20, 20), (90, 40, 200))
    runner = booth.Predictor("eager", "CPU", lambda batch: loaded.model(batch))
    results: list[object] = []
    if forward == "booth":
        work = threading.Thread(target=lambda: results.append(booth.predict_timed(loaded, runner, image)))
    else:
        work = threading.Thread(target=lambda: results.append(grad_cam(loaded, image, layer="features")))
    with forward_slot():  # another visitor's forward holds the only slot
        work.start()
        work.join(timeout=0.5)
        assert work.is_alive(), f"{forward} ran while the only forward slot was taken"
    work.join(timeout=30)
    assert not work.is_alive() and len(results) == 1
