"""Which backend to use: the fastest-choice rule, and the backend and precision choices offered to users.

The ranking is measured (docs/BENCHMARKS.md); whether a backend or precision is offered comes from
each backend's `availability` here, so the UI and CLI never offer what cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dlguide_core.errors import DlguideError
from dlguide_core.inference.backend_base import PRECISIONS, Backend, BackendOptions, Progress
from dlguide_core.inference.backend_migraphx import TITLES as MIGRAPHX_TITLES
from dlguide_core.inference.backend_migraphx import MigraphxBackend
from dlguide_core.inference.backend_onnxruntime import OnnxRuntimeBackend
from dlguide_core.inference.registry import backend_class, backend_status, prepare_backend
from dlguide_core.vision.models import LoadedModel


@dataclass(frozen=True)
class BackendChoice:
    name: str
    options: BackendOptions
    reason: str


def fastest_available(loaded: LoadedModel | None = None) -> BackendChoice:
    """The backend expected to be fastest here, by measured ranking (docs/BENCHMARKS.md):
    MIGraphX on an AMD GPU, then ONNX Runtime on a GPU provider, then PyTorch on a GPU,
    then ONNX Runtime on the CPU (fp32: ~1.8x the guide's eager PyTorch there, same answers), then eager
    PyTorch. ORT int8 is faster still on the CPU (~4x) but approximate, so it is never picked
    silently: users opt in with the precision choice. MIGraphX (CPU) measured ~10x slower than ONNX
    Runtime on the CPU here, so it is not ranked statically: `cpu_contenders` names it, and the booth
    (booth.fastest_runner) picks it only when it measures faster on the machine at hand."""
    on_gpu = (loaded.device.type == "cuda") if loaded is not None else torch.cuda.is_available()
    gpu = BackendOptions(target="gpu")
    if MigraphxBackend.availability(gpu).available:
        return BackendChoice("migraphx", gpu, "MIGraphX compiled for the AMD GPU")
    ort_gpu = OnnxRuntimeBackend.availability(gpu)
    if ort_gpu.available:
        return BackendChoice("onnxruntime", gpu, f"ONNX Runtime on a GPU provider ({ort_gpu.reason})")
    if on_gpu:
        return BackendChoice("torch", BackendOptions(), "PyTorch eager on the GPU (no compiled GPU runtime here)")
    if OnnxRuntimeBackend.availability(BackendOptions(target="cpu")).available:
        return BackendChoice("onnxruntime", BackendOptions(target="cpu"), "ONNX Runtime on the CPU")
    return BackendChoice("torch", BackendOptions(), "PyTorch eager (no compiled runtime installed)")


def cpu_contenders(choice: BackendChoice) -> list[BackendChoice]:
    """Backends worth timing against a CPU `choice`: MIGraphX (CPU) against ONNX Runtime on the CPU."""
    cpu = BackendOptions(target="cpu")
    if choice.name != "onnxruntime" or choice.options.target != "cpu":
        return []
    status = MigraphxBackend.availability(cpu)
    return [BackendChoice("migraphx", cpu, f"{MIGRAPHX_TITLES['cpu']} ({status.reason})")] if status.available else []


def prepare_fastest(loaded: LoadedModel, *, batch_size: int = 1, progress: Progress | None = None) -> Backend:
    """Prepare `fastest_available`, falling back to eager PyTorch if that fails (never raises for it)."""
    choice = fastest_available(loaded)
    if choice.name != "torch":
        try:
            return prepare_backend(choice.name, loaded, batch_size=batch_size, options=choice.options,
                                   progress=progress)
        except DlguideError:
            pass  # e.g. a broken GPU runtime: eager PyTorch still answers
    return prepare_backend("torch", loaded, batch_size=batch_size, progress=progress)


def available_names(options: BackendOptions | None = None) -> list[str]:
    return [status.name for status in backend_status(options) if status.available]


def backend_choices(options: BackendOptions | None = None) -> list[str]:
    """What a user may pick: PyTorch first (the baseline and default), then each backend that can run here."""
    return ["torch", *[name for name in available_names(options) if name != "torch"]]


def precision_choices(name: str, target: str = "auto") -> tuple[str, ...]:
    """The precisions `name` can run here for `target` (fp32 always first; fp16/int8 need MIGraphX,
    itself or as ONNX Runtime's execution provider)."""
    cls = backend_class(name)
    extra = tuple(p for p in PRECISIONS[1:] if cls.availability(BackendOptions(precision=p, target=target)).available)
    return ("fp32", *extra)


def precision_refusals(name: str, target: str = "auto") -> dict[str, str]:
    """Each precision `name` cannot run here for `target`, with the one-line reason (for the UI and CLI)."""
    cls = backend_class(name)
    states = {p: cls.availability(BackendOptions(precision=p, target=target)) for p in PRECISIONS[1:]}
    return {p: s.reason for p, s in states.items() if not s.available}
