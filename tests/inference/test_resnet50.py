"""ResNet-50, the registry's second ImageNet architecture, through export and every inference backend, at the
smallest size its entry allows (64 px) with random weights: a checkpoint as training writes it, the ONNX export,
then eager PyTorch, ONNX Runtime and MIGraphX's cpu target (the real library from ../shared/migraphx, skipped
with the reason when it does not load) each agreeing with eager PyTorch on the same batch."""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path

import pytest
import torch

from dlguide_core.inference import backend_base
from dlguide_core.inference.backend_base import BackendOptions, sample_batch
from dlguide_core.inference.export import export_cache_path, export_onnx, read_metadata
from dlguide_core.inference.registry import prepare_backend
from dlguide_core.vision.architectures import RESNET50
from dlguide_core.vision.checkpoints import save_checkpoint
from dlguide_core.vision.classify import predict_logits
from dlguide_core.vision.models import LoadedModel, load_model
from dlguide_core.vision.presets import scaled_presets
from tests.support.compiled_helpers import dlguide_home
from tests.support.fake_migraphx import real_migraphx

SIZE = RESNET50.min_size
CLASSES = ("cat", "dog", "fox")


@pytest.fixture(scope="module")
def resnet_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, LoadedModel]:
    """(a ResNet-50 checkpoint with a 64 px preset, its ONNX export, the checkpoint loaded on the CPU), made once
    per module. The export is the legacy torchscript one; the dynamo exporter's own test is marked slow."""
    work = tmp_path_factory.mktemp("resnet50")
    torch.manual_seed(0)
    model = RESNET50.build(num_classes=len(CLASSES))
    checkpoint = save_checkpoint(work / "resnet50.pt", {
        "arch": RESNET50.name, "arch_kwargs": {"num_classes": len(CLASSES)}, "class_names": list(CLASSES),
        "preset": scaled_presets(SIZE, RESNET50.eval_preset)[1].to_dict(), "model": model.state_dict()})
    loaded = load_model(str(checkpoint), device="cpu")  # read-only from here on, as the app's cached model
    with dlguide_home(work / "home"):
        onnx_path = Path(export_onnx(loaded, exporter="torchscript").path)
    return checkpoint, onnx_path, loaded


@pytest.fixture
def resnet(resnet_files, isolated_home, monkeypatch: pytest.MonkeyPatch) -> LoadedModel:
    """The loaded checkpoint, its torchscript export already in this test's DLGUIDE_HOME cache, and the backends
    set to use that exporter."""
    _checkpoint, onnx_path, loaded = resnet_files
    cache = export_cache_path(loaded, "torchscript")
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(onnx_path, cache)
    monkeypatch.setattr(backend_base, "export_onnx", partial(export_onnx, exporter="torchscript"))
    return loaded


def _rel(reference: torch.Tensor, logits: torch.Tensor) -> float:
    return float((reference - logits).abs().max()) / float(reference.abs().max())


def test_the_checkpoint_loads_with_its_preset_and_names(resnet):
    assert (resnet.arch, resnet.class_names, resnet.preset.crop) == (RESNET50.name, CLASSES, SIZE)
    assert resnet.preset.resize == round(SIZE * 232 / 224)  # IMAGENET1K_V2's 232/224, not Inception's 342/299


@pytest.mark.slow
def test_the_default_dynamo_export_carries_the_architecture(resnet_files, isolated_home):
    export = export_onnx(resnet_files[2])
    assert (export.exporter, export.arch, export.class_names) == ("dynamo", RESNET50.name, CLASSES)
    assert export.input_shape[1:] == (3, SIZE, SIZE) and read_metadata(export.path)["arch"] == RESNET50.name


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
def test_backend_agrees_with_eager(resnet, backend):
    batch = sample_batch(resnet, 2)
    reference = predict_logits(resnet, batch)
    logits = prepare_backend(backend, resnet, batch_size=2).run(batch)
    assert logits.shape == (2, len(CLASSES)) and _rel(reference, logits) <= 1e-3


@pytest.mark.migraphx  # not slow: compiling ResNet-50 for the cpu target took 10-16 s on the busy 2-core box
def test_migraphx_cpu_target_agrees_with_eager(resnet):
    real_migraphx()
    batch = sample_batch(resnet, 2)
    backend = prepare_backend("migraphx", resnet, batch_size=2, options=BackendOptions(target="cpu"))
    assert _rel(predict_logits(resnet, batch), backend.run(batch)) <= 1e-3
