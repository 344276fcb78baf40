"""What every inference backend shares: options, availability, the Backend interface, the sample batch,
and a prepared backend dressed as a LoadedModel (`backend_model`).

Every backend is prepared once for a LoadedModel (`prepare`: export, session creation or
compilation, timed as `setup_s`), then turns a preprocessed batch (B, 3, crop, crop) into
(B, C) float32 logits on the CPU (`run`), and says what it is (`describe`). Whether a
backend can run here is a state (`availability`), never an exception at import time.
Preprocessing is not a backend's business: callers use `presets.preprocess` with the
model's preset, so every backend sees the very same tensor.
"""

from __future__ import annotations

import copy
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from dlguide_core.errors import DlguideError
from dlguide_core.inference import specs
from dlguide_core.inference.export import OnnxExport, export_cached, export_onnx, made_here_s
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess
from dlguide_core.vision.samples import bundled_samples

Progress = Callable[[str, float], object]  # (what is happening, fraction done in [0, 1]); its return is ignored
PRECISIONS, TARGETS = specs.PRECISIONS, specs.TARGETS
GRAPH_OPTIMIZATIONS = ("all", "extended", "basic", "disabled")


class BackendError(DlguideError):
    """A backend failed to prepare or run (one line, safe to show)."""


class BackendUnavailable(BackendError):
    """The backend cannot run on this machine; the message says why."""


@dataclass(frozen=True)
class BackendOptions:
    """How to prepare a backend. Hashable, so the app can key cached sessions by it."""

    precision: str = "fp32"  # fp16/bf16/int8: MIGraphX (quantize_*); fp16/int8 also ORT's MIGraphX EP
    target: str = "auto"  # auto: the GPU when one is visible, else the CPU
    exhaustive_tune: bool = False  # MIGraphX: search every kernel variant at compile time (slow compile)
    torch_compile: str | None = None  # torch: a torch.compile backend name ("inductor"), None for eager
    intra_op_threads: int = 0  # ONNX Runtime: 0 = its default (one per physical core)
    inter_op_threads: int = 0
    graph_optimization: str = "all"  # ONNX Runtime graph optimisation level
    mxr: str | None = None  # MIGraphX: a .mxr compiled outside dlguide (migraphx-driver) to load instead

    def __post_init__(self) -> None:
        for value, choices, name in ((self.precision, PRECISIONS, "precision"), (self.target, TARGETS, "target"),
                                     (self.graph_optimization, GRAPH_OPTIMIZATIONS, "graph_optimization")):
            if value not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")


@dataclass(frozen=True)
class Availability:
    name: str
    title: str
    available: bool
    reason: str


@dataclass(frozen=True)
class BackendInfo:
    """What a prepared backend is (`Backend.describe`); `to_json` gives these keys, as the dict it replaced."""

    backend: str
    title: str
    provider: str | None
    precision: str
    batch_size: int
    setup_s: float
    onnx: str | None  # the ONNX export it runs, None for PyTorch
    export_s: float | None  # what that export took, None when reused from the cache
    export_made_s: float | None  # what this server took to make that export (earlier), None: found it cached

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def amd_gpu_visible() -> bool:
    """An AMD GPU through ROCm's kernel driver (/dev/kfd): what MIGraphX's gpu target needs."""
    return Path("/dev/kfd").exists()




class Backend(ABC):
    """Prepare once for a model and batch size, then run preprocessed batches to logits."""

    name: ClassVar[str]
    title: ClassVar[str]

    def __init__(self, options: BackendOptions | None = None) -> None:
        self.options = options or BackendOptions()
        self.loaded: LoadedModel | None = None
        self.batch_size = 0
        self.setup_s = 0.0  # session creation / compilation (or .mxr load) time, export excluded
        self.export: OnnxExport | None = None

    @classmethod
    @abstractmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability: ...

    @property
    @abstractmethod
    def provider(self) -> str:
        """What actually runs the graph (a device, an execution provider, a MIGraphX target)."""

    def prepare(self, loaded: LoadedModel, *, batch_size: int = 1, progress: Progress | None = None) -> Backend:
        status = self.availability(self.options)
        if not status.available:
            raise BackendUnavailable(f"{status.title} is unavailable: {status.reason}")
        self.loaded, self.batch_size = loaded, batch_size
        start = time.perf_counter()
        self._prepare(loaded, progress or (lambda _msg, _frac: None))
        self.setup_s = time.perf_counter() - start - (self.export.export_s if self.export else 0.0)
        return self

    @abstractmethod
    def _prepare(self, loaded: LoadedModel, progress: Progress) -> None: ...

    @abstractmethod
    def run(self, batch: torch.Tensor) -> torch.Tensor:
        """(B, 3, crop, crop) preprocessed float32 -> (B, C) float32 logits on the CPU."""

    def run_features(self, batch: torch.Tensor) -> Outputs:
        """One forward, both heads: (B, C) logits and the (B, D) pooled features the classifier multiplies (issue
        44: the booth's Teach). Every backend gives them from its own run (the ONNX export's second output); this
        default, for a graph without that output (a torch.compile child, a .mxr compiled elsewhere), runs the
        batch through the eager model instead."""
        assert self.loaded is not None, "prepare the backend first"
        return eager_outputs(self.loaded, batch)

    def _export(self, loaded: LoadedModel, progress: Progress) -> OnnxExport:
        progress("Reusing the ONNX export cached for these weights…" if export_cached(loaded) else
                 "Exporting to ONNX (once per weights: the file is then cached by their hash)…", 0.1)
        self.export = export_onnx(loaded)
        return self.export

    @property
    def label(self) -> str:
        """What the UI, `bench` and the booth call this backend ("MIGraphX (CPU)" where it matters)."""
        return self.title

    @property
    def on_gpu(self) -> bool:
        """Whether what runs the graph is a GPU (the booth's device line); the CPU unless a backend says so."""
        return False

    @classmethod
    def contends(cls, options: BackendOptions) -> str | None:
        """None where the booth should time this variant against its pick (a `timed` entry of `specs`), else
        why not, in words. Every backend contends unless it knows it cannot win on this machine."""
        return None

    def precompile(self, loaded: LoadedModel, *, batch_size: int = 1,  # noqa: B027 - a hook, empty by default
                   progress: Progress | None = None) -> None:
        """The slow, disk-cached part of preparing, with progress (`registry.precompile`); nothing by default."""

    def describe(self) -> BackendInfo:
        return BackendInfo(
            backend=self.name, title=self.label, provider=self.provider if self.loaded else None,
            precision=self.options.precision, batch_size=self.batch_size, setup_s=round(self.setup_s, 3),
            onnx=self.export.path if self.export else None,
            export_s=self.export.export_s if self.export else None,
            export_made_s=made_here_s(self.export.path) if self.export else None,
        )


def sample_batch(loaded: LoadedModel, batch_size: int) -> torch.Tensor:
    """The bundled photos, preprocessed with the model's preset, repeated to (batch_size, 3, crop, crop)."""
    photos = [load_image(path) for path in bundled_samples().values()]
    batch = preprocess(photos, loaded.preset)  # (n_photos, 3, crop, crop)
    repeats = -(-batch_size // len(batch))
    return batch.repeat(repeats, 1, 1, 1)[:batch_size].contiguous()


@dataclass(frozen=True)
class Outputs:
    """A forward's two heads, on the CPU: the classifier's logits and the pooled features it multiplies."""

    logits: torch.Tensor  # (B, C) float32
    features: torch.Tensor  # (B, D) float32 (D = 2048 for Inception v3)


_BODIES: weakref.WeakKeyDictionary[nn.Module, nn.Module] = weakref.WeakKeyDictionary()
_BODIES_LOCK = threading.Lock()


def head_layer(loaded: LoadedModel) -> nn.Linear:
    """The architecture's classifier layer (`Architecture.head`): features in, logits out."""
    from dlguide_core.vision.architectures import architecture

    layer = loaded.model.get_submodule(architecture(loaded.arch).head)
    if not isinstance(layer, nn.Linear):
        raise BackendError(f"{loaded.arch}'s head is not a linear layer")
    return layer


def model_body(loaded: LoadedModel) -> nn.Module:
    """`loaded.model` up to its head: the same modules and weights (nothing copied), the head an identity, so its
    forward returns the pooled features. Made once per model; a thread-safe alternative to a forward hook."""
    with _BODIES_LOCK:
        body = _BODIES.get(loaded.model)
        if body is None:
            from dlguide_core.vision.architectures import architecture

            path = architecture(loaded.arch).head
            owner_path, _, attr = path.rpartition(".")
            body = _shallow(loaded.model)
            owner = body
            for part in owner_path.split(".") if owner_path else []:  # copy the chain down to the head's owner
                child = _shallow(owner._modules[part])
                owner._modules[part] = child
                owner = child
            owner._modules[attr] = nn.Identity()
            _BODIES[loaded.model] = body
        return body


def _shallow(module: nn.Module) -> nn.Module:
    clone = copy.copy(module)
    clone._modules = dict(module._modules)  # its own list of children; the children themselves are shared
    return clone


def eager_outputs(loaded: LoadedModel, batch: torch.Tensor) -> Outputs:
    """One eager forward of `loaded` giving both heads: the body's pooled features, then the head's matmul."""
    body, head = model_body(loaded), head_layer(loaded)
    x = batch.to(loaded.device)
    if loaded.device.type == "cpu":
        x = x.contiguous(memory_format=torch.channels_last)  # as classify.predict_logits feeds it
    with torch.inference_mode():
        features = body(x).flatten(1)
        logits = head(features)
    return Outputs(logits.float().cpu(), features.float().cpu())


class BackendModule(nn.Module):
    """A prepared backend dressed as an nn.Module, so LoadedModel consumers run through it unchanged."""

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend
        # A zero-size parameter so LoadedModel.device says "cpu": backends take host tensors.
        self.anchor = nn.Parameter(torch.empty(0), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, crop, crop) -> (B, C)
        return self.backend.run(x)


def backend_model(loaded: LoadedModel, backend: Backend) -> LoadedModel:
    """`loaded` with its forward routed through `backend` (same classes, preset and fingerprint).

    e.g. `classify.classify_sources(backend_model(loaded, backend), sources)` classifies
    through ONNX Runtime or MIGraphX with the exact decoding and top-k of the eager path."""
    if backend.name == specs.BASELINE and not backend.options.torch_compile:
        return loaded
    return replace(loaded, model=BackendModule(backend), label=f"{loaded.label} · {backend.title}")
