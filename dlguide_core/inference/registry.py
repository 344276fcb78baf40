"""The inference backends by name: which exist, whether each can run here, and preparing one.

The registry lists the three backend classes (`backend_torch`, `backend_onnxruntime`,
`backend_migraphx`); the backends themselves know nothing of it.
"""

from __future__ import annotations

from dlguide_core.inference.backend_base import Availability, Backend, BackendOptions, Progress
from dlguide_core.inference.backend_migraphx import TITLES as MIGRAPHX_TITLES
from dlguide_core.inference.backend_migraphx import MigraphxBackend
from dlguide_core.inference.backend_onnxruntime import OnnxRuntimeBackend
from dlguide_core.inference.backend_torch import TorchBackend
from dlguide_core.inference.export import export_onnx
from dlguide_core.vision.models import LoadedModel

BACKENDS: dict[str, type[Backend]] = {b.name: b for b in (TorchBackend, OnnxRuntimeBackend, MigraphxBackend)}


def backend_class(name: str) -> type[Backend]:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def backend_status(options: BackendOptions | None = None) -> list[Availability]:
    """Every backend with whether it can run here and why (or why not)."""
    return [cls.availability(options) for cls in BACKENDS.values()]


def prepare_backend(name: str, loaded: LoadedModel, *, batch_size: int = 1, options: BackendOptions | None = None,
                    progress: Progress | None = None) -> Backend:
    """A ready-to-run backend; BackendUnavailable/BackendError (one line) when it cannot be."""
    return backend_class(name)(options).prepare(loaded, batch_size=batch_size, progress=progress)


def precompile(name: str, loaded: LoadedModel, *, batch_size: int = 1, options: BackendOptions | None = None,
               progress: Progress | None = None) -> None:
    """Do the slow, disk-cached part of preparing, with progress: the ONNX export and, for MIGraphX,
    compiling to .mxr. A later `prepare_backend` (e.g. inside a UI cache, which cannot report progress)
    then only loads files. Eager PyTorch has nothing to precompile."""
    progress = progress or (lambda _msg, _frac: None)
    if name == "onnxruntime":
        progress("Exporting to ONNX (cached by weights hash)…", 0.1)
        export_onnx(loaded)
    elif name == "migraphx":
        prepare_backend(name, loaded, batch_size=batch_size, options=options, progress=progress)
    progress("Ready", 1.0)


def backend_label(name: str, provider: str | None = None) -> str:
    """A bench row's or a prepared backend's name for people: "MIGraphX (CPU)" for provider migraphx:cpu."""
    if name == "migraphx" and provider:
        return MIGRAPHX_TITLES.get(provider.split(":", 1)[-1].split()[0], MigraphxBackend.title)
    return BACKENDS[name].title if name in BACKENDS else name
