"""The export runs in a child process: live inference in other threads of this process is untouched
(issue 18: torch's dynamo exporter patches nn.Module.__call__ process-wide while it traces)."""

from __future__ import annotations

import threading

import pytest
import torch

from dlguide_core.inference.export import ExportError, export_onnx, read_metadata
from dlguide_core.vision.classify import predict_logits
from dlguide_core.vision.models import load_model


def test_inference_in_another_thread_is_unaffected_by_an_export(cifar_files, monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("torch.onnx.export ran in the serving process")

    monkeypatch.setattr(torch.onnx, "export", refuse)  # the child has its own torch.onnx
    loaded = load_model(str(cifar_files[0]), device="cpu")
    other = load_model(str(cifar_files[0]), device="cpu")  # a second visitor's model, same weights
    batch = torch.randn(4, 3, 32, 32)
    reference = predict_logits(other, batch)
    errors: list[BaseException] = []
    outputs: list[torch.Tensor] = []
    exporting = threading.Event()

    def visitor() -> None:
        while not exporting.is_set() or len(outputs) < 5:
            try:
                outputs.append(predict_logits(other, batch))
            except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
                errors.append(exc)
                return
            if len(outputs) > 100_000:
                return

    thread = threading.Thread(target=visitor)
    thread.start()
    try:
        exporting.clear()
        result = export_onnx(loaded, force=True)
    finally:
        exporting.set()
        thread.join(timeout=60)
    assert not errors, f"inference failed during the export: {errors[0]!r}"
    assert outputs and all(torch.equal(out, reference) for out in outputs)
    assert not result.cached and read_metadata(result.path)["fingerprint"] == loaded.fingerprint


def test_a_child_that_dies_gives_one_line(cifar_files, monkeypatch):
    loaded = load_model(str(cifar_files[0]), device="cpu")
    monkeypatch.setenv("PYTHONPATH", "")  # still finds the package: the parent puts its root first
    monkeypatch.setattr("dlguide_core.inference.export.sys.executable", "/bin/false")
    with pytest.raises(ExportError, match=r"process failed \(exit 1\)"):
        export_onnx(loaded, force=True)
