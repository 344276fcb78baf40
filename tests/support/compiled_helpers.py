"""Shared helpers for the compiled-inference tests (export, backends, benchmark, CLI, page).

A tiny CIFAR CNN checkpoint keeps these tests to seconds; the Inception v3 parity test
uses the conftest's calibrated stand-in for the ImageNet weights instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from dlguide_core.inference.export import export_cache_path, export_onnx
from dlguide_core.vision.checkpoints import save_checkpoint
from dlguide_core.vision.models import CIFAR10_CLASSES, LoadedModel, load_model
from dlguide_core.vision.presets import CIFAR_EVAL
from dlguide_core.vision.small_cnn import CifarNet


def write_cifar_checkpoint(path: Path, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    model = CifarNet()
    return save_checkpoint(path, {"arch": "cifar_net", "arch_kwargs": {"num_classes": 10},
                                  "class_names": list(CIFAR10_CLASSES), "preset": CIFAR_EVAL.to_dict(),
                                  "model": model.state_dict(), "job_id": "test", "epoch": 1})


@contextmanager
def dlguide_home(path: Path) -> Iterator[Path]:
    """DLGUIDE_HOME=path inside the block (for module-scoped fixtures, which cannot use monkeypatch)."""
    old = os.environ.get("DLGUIDE_HOME")
    os.environ["DLGUIDE_HOME"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("DLGUIDE_HOME", None)
        else:
            os.environ["DLGUIDE_HOME"] = old


def exported_cifar(workdir: Path) -> tuple[Path, Path]:
    """(checkpoint, its ONNX export), made once per test module under `workdir`."""
    checkpoint = write_cifar_checkpoint(workdir / "cifar.pt")
    with dlguide_home(workdir / "home"):
        onnx_path = Path(export_onnx(load_model(str(checkpoint), device="cpu")).path)
    return checkpoint, onnx_path


def seed_export_cache(loaded: LoadedModel, onnx_path: Path) -> Path:
    """Copy a ready export into the current DLGUIDE_HOME's cache, as if exported here."""
    target = export_cache_path(loaded)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(onnx_path, target)
    return target


def finish_bench(at, timeout: float = 600.0):
    """Wait for the Compiled page's background benchmark (ui.compiled.BENCH_JOB_KEY) to end, then run the page
    again so it shows the rows (AppTest does not fire the status line's timer)."""
    try:
        job = at.session_state["compiled_bench_job"]
    except KeyError:
        return at.run()
    job.join(timeout)
    return at.run()
