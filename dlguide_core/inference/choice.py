"""Which backend to use: the fastest-choice rule, and the backend and precision choices offered to users.

The ranking is measured (docs/BENCHMARKS.md); whether a backend or precision is offered comes from
each backend's `availability` here, so the UI and CLI never offer what cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from dlguide_core import settings
from dlguide_core.errors import DlguideError
from dlguide_core.inference.backend_base import PRECISIONS, Backend, BackendOptions, Progress
from dlguide_core.inference.backend_migraphx import TITLES as MIGRAPHX_TITLES
from dlguide_core.inference.backend_migraphx import MigraphxBackend
from dlguide_core.inference.backend_onnxruntime import OnnxRuntimeBackend
from dlguide_core.inference.registry import backend_class, backend_status, prepare_backend
from dlguide_core.vision.classify import predict_logits
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess
from dlguide_core.vision.samples import bundled_samples

AGREEMENT_MIN = 0.99  # an approximate variant (int8) is a contender only when its top-1 agrees this often
CHECK_VAL_PHOTOS = 48  # val photos (beyond the bundled ones) it must agree on, where the data roots have some


@dataclass(frozen=True)
class BackendChoice:
    name: str
    options: BackendOptions
    reason: str


def fastest_available(loaded: LoadedModel | None = None) -> BackendChoice:
    """The backend expected to be fastest here, by measured ranking (docs/BENCHMARKS.md):
    MIGraphX on an AMD GPU, then ONNX Runtime on a GPU provider, then PyTorch on a GPU,
    then ONNX Runtime on the CPU (fp32: ~1.8x the guide's eager PyTorch there, same answers), then eager
    PyTorch. On a CPU host the booth (booth.fastest_measured) then times the `cpu_contenders` against it:
    ORT int8 (~2x faster again, approximate: only where its top-1 agrees with eager on the check photos)
    and MIGraphX (CPU) fp32 (1.5-2x slower than ORT fp32 here); the lowest measured p50 wins."""
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
    """Variants worth timing against ONNX Runtime fp32 on the CPU: its static int8 model (approximate: it
    competes only where `top1_agreement` with eager reaches AGREEMENT_MIN) and MIGraphX (CPU) fp32."""
    cpu, int8 = BackendOptions(target="cpu"), BackendOptions(target="cpu", precision="int8")
    if choice.name != "onnxruntime" or choice.options.target != "cpu":
        return []
    out = []
    if OnnxRuntimeBackend.availability(int8).available:
        out.append(BackendChoice("onnxruntime", int8, "ONNX Runtime int8 (static QDQ, calibrated on the samples)"))
    status = MigraphxBackend.availability(cpu)
    if status.available:
        out.append(BackendChoice("migraphx", cpu, f"{MIGRAPHX_TITLES['cpu']} ({status.reason})"))
    return out


def check_photos(limit: int = CHECK_VAL_PHOTOS) -> list[Path]:
    """The photos an approximate variant must agree on: the bundled photos, then up to `limit` val photos
    of the datasets under the data roots (<root>/<dataset>/val/images/*.JPEG, tiny-imagenet's layout)."""
    val: list[Path] = []
    for root in settings.data_roots():
        for folder in sorted(root.glob("*/val/images")):
            val += sorted(folder.glob("*.JPEG"))[:limit - len(val)]
    return [*bundled_samples().values(), *val[:limit]]


def top1_agreement(loaded: LoadedModel, backend: Backend, photos: list[Path], chunk: int = 8) -> float:
    """Fraction of `photos` whose top-1 class through `backend` is eager PyTorch's."""
    same = 0
    for start in range(0, len(photos), chunk):
        batch = preprocess([load_image(p) for p in photos[start:start + chunk]], loaded.preset)  # (b, 3, H, W)
        with torch.inference_mode():
            reference = predict_logits(loaded, batch).argmax(1)
        same += int((backend.run(batch).argmax(1) == reference).sum())
    return same / max(1, len(photos))


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
