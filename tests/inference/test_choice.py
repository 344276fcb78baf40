"""The CPU contenders the booth times, the photos an approximate variant must agree on, and the agreement itself."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from dlguide_core import migraphx_lib
from dlguide_core.inference import backend_base, choice
from dlguide_core.inference.backend_base import BackendOptions
from dlguide_core.inference.registry import prepare_backend
from dlguide_core.vision.samples import bundled_samples
from tests.support.fake_migraphx import FakeMigraphx


@pytest.fixture
def cpu_host_with_migraphx(monkeypatch: pytest.MonkeyPatch) -> FakeMigraphx:
    """The fake migraphx on a host without an AMD GPU: its cpu target is what runs."""
    fake = FakeMigraphx()
    monkeypatch.setitem(sys.modules, "migraphx", fake)
    monkeypatch.setattr(backend_base, "amd_gpu_visible", lambda: False)
    monkeypatch.setitem(sys.modules, "zentorch", None)  # its place among them: test_backend_zentorch.py
    assert "fp32" in migraphx_lib.target_support("cpu").precisions
    return fake


def test_cpu_contenders_are_ort_int8_and_migraphx_cpu(cpu_host_with_migraphx, cifar):
    best = choice.fastest_available(cifar)
    assert (best.name, best.options.target, best.options.precision) == ("onnxruntime", "cpu", "fp32")
    named = [(c.name, c.options.target, c.options.precision) for c in choice.cpu_contenders(best)]
    assert named == [("onnxruntime", "cpu", "int8"), ("migraphx", "cpu", "fp32")]


def test_without_migraphx_ort_int8_is_the_only_contender(monkeypatch, cifar):
    monkeypatch.setitem(sys.modules, "migraphx", None)
    monkeypatch.setitem(sys.modules, "zentorch", None)  # its place among them: test_backend_zentorch.py
    best = choice.fastest_available(cifar)
    assert [(c.name, c.options.precision) for c in choice.cpu_contenders(best)] == [("onnxruntime", "int8")]
    eager = choice.BackendChoice("torch", BackendOptions(), "no runtime")
    assert choice.cpu_contenders(eager) == []  # nothing is timed against eager PyTorch


def _val_folder(root: Path, dataset: str, count: int) -> list[Path]:
    folder = root / dataset / "val" / "images"
    folder.mkdir(parents=True)
    for i in range(count):
        Image.new("RGB", (64, 64), (i * 20 % 255, 90, 160)).save(folder / f"val_{i}.JPEG")
    return sorted(folder.glob("*.JPEG"))


def test_check_photos_are_the_bundled_photos_then_val_photos_under_the_data_roots(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path))
    assert choice.check_photos() == list(bundled_samples().values())  # no val folder: the bundled photos only
    first = _val_folder(tmp_path, "a-set", 3)
    second = _val_folder(tmp_path, "b-set", 4)
    assert choice.check_photos() == [*bundled_samples().values(), *first, *second]
    assert choice.check_photos(limit=5) == [*bundled_samples().values(), *first, *second[:2]]


class _Shifted:
    """A backend whose logits are eager's, with the top class moved on chosen rows."""

    def __init__(self, loaded, wrong_rows: set[int]) -> None:
        self.loaded, self.wrong_rows, self.seen = loaded, wrong_rows, 0

    def run(self, batch: torch.Tensor) -> torch.Tensor:
        from dlguide_core.vision.classify import predict_logits

        logits = predict_logits(self.loaded, batch).clone()
        for row in range(len(batch)):
            if self.seen + row in self.wrong_rows:
                logits[row, logits[row].argmin()] = logits[row].max() + 1  # a new arg-max
        self.seen += len(batch)
        return logits


def test_top1_agreement_counts_photos_whose_class_changes(monkeypatch, tmp_path: Path, cifar):
    photos = [*bundled_samples().values(), *_val_folder(tmp_path, "set", 8)]  # 10 photos, chunks of 8 and 2
    assert choice.top1_agreement(cifar, _Shifted(cifar, set()), photos) == 1.0
    assert choice.top1_agreement(cifar, _Shifted(cifar, {0, 9}), photos) == 0.8
    ort = prepare_backend("onnxruntime", cifar, options=BackendOptions(target="cpu"))
    assert choice.top1_agreement(cifar, ort, photos) == 1.0  # fp32 ONNX Runtime gives eager's answers
