"""Inference backends behind one interface: PyTorch eager (or torch.compile), ONNX Runtime, MIGraphX.

The interface, options and availability live in `backend_base`, MIGraphX in `backend_migraphx`;
this module holds eager PyTorch and ONNX Runtime, the registry, the fastest-choice ranking and
the helpers the app uses. Whether a backend can run here is a state (`availability`), never an
exception at import time: onnxruntime and migraphx are imported inside the functions that need them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from dlguide_core.errors import DlguideError
from dlguide_core.inference.backend_base import (  # noqa: F401 - re-exported: callers import them from here
    GRAPH_OPTIMIZATIONS,
    PRECISIONS,
    TARGETS,
    Availability,
    Backend,
    BackendError,
    BackendOptions,
    BackendUnavailable,
    Progress,
    sample_batch,
    short_error,
)
from dlguide_core.inference.backend_migraphx import TITLES as MIGRAPHX_TITLES
from dlguide_core.inference.backend_migraphx import MigraphxBackend, compiled_path  # noqa: F401 - re-exported
from dlguide_core.inference.export import export_onnx, quantize_int8
from dlguide_core.vision.models import LoadedModel

# ONNX Runtime execution providers, most preferred first (CPU is always last and always there).
ORT_PROVIDER_PREFERENCE = ("MIGraphXExecutionProvider", "ROCMExecutionProvider", "CUDAExecutionProvider",
                           "CPUExecutionProvider")
ORT_GPU_PROVIDERS = frozenset(ORT_PROVIDER_PREFERENCE[:3])


class TorchBackend(Backend):
    """PyTorch eager on the model's own device: the baseline every other backend is compared with."""

    name, title = "torch", "PyTorch (eager)"

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        if options and options.precision != "fp32":
            reason = "PyTorch eager runs fp32 only; fp16/bf16/int8 need MIGraphX"
            return Availability(cls.name, cls.title, False, reason)
        if options and options.torch_compile:
            ok, reason = torch_compile_status()
            return Availability(cls.name, cls.title, ok, reason)
        where = "GPU" if torch.cuda.is_available() else "CPU"
        return Availability(cls.name, cls.title, True, f"PyTorch {torch.__version__} on the {where}")

    @property
    def provider(self) -> str:
        device = str(self.loaded.device) if self.loaded else "?"
        return f"{device} (torch.compile {self.options.torch_compile})" if self.options.torch_compile else device

    def _prepare(self, loaded: LoadedModel, progress: Progress) -> None:
        self._module = loaded.model  # fp32 only: `availability` refuses other precisions
        if self.options.torch_compile:
            progress(f"torch.compile (backend {self.options.torch_compile}) and first run…", 0.3)
            # A new wrapper: the cached LoadedModel itself is never modified.
            self._module = torch.compile(loaded.model, backend=self.options.torch_compile)
            try:
                self.run(sample_batch(loaded, self.batch_size))  # compilation happens on the first call
            except Exception as exc:
                raise BackendError(f"torch.compile failed: {short_error(exc)}") from exc
        progress("Ready", 1.0)

    @torch.inference_mode()
    def run(self, batch: torch.Tensor) -> torch.Tensor:
        return self._module(batch.to(self.loaded.device)).float().cpu()


def torch_compile_status() -> tuple[bool, str]:
    """torch.compile needs dynamo support and, for the CPU (inductor), a C++ compiler."""
    import shutil

    if not torch._dynamo.is_dynamo_supported():
        return False, "torch.compile is not supported on this Python/platform"
    if not torch.cuda.is_available() and not shutil.which(os.environ.get("CXX", "g++")):
        return False, "torch.compile on the CPU needs a C++ compiler (g++) on PATH"
    return True, f"torch.compile available (torch {torch.__version__}); the first run compiles (minutes on a CPU)"


class OnnxRuntimeBackend(Backend):
    """ONNX Runtime with the best execution provider present and full graph optimisation."""

    name, title = "onnxruntime", "ONNX Runtime"

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        try:
            import onnxruntime
        except ImportError:
            reason = "module onnxruntime not installed (pip install onnxruntime)"
            return Availability(cls.name, cls.title, False, reason)
        options = options or BackendOptions()
        if options.precision == "bf16":
            return Availability(cls.name, cls.title, False, "bf16 runs on the MIGraphX backend only (quantize_bf16)")
        try:
            providers = ort_providers(options)
        except BackendUnavailable as exc:
            return Availability(cls.name, cls.title, False, str(exc))
        if not _ort_precision_runs(options.precision, providers[0]):
            # A missing provider, like a missing module: a state, not a failure of the run.
            return Availability(cls.name, cls.title, False, f"{options.precision} with ONNX Runtime needs the MIGraphX "
                                f"execution provider (this build runs {providers[0]}); use fp32 or MIGraphX")
        return Availability(cls.name, cls.title, True,
                            f"onnxruntime {onnxruntime.__version__}; providers in order: {', '.join(providers)}")

    @property
    def provider(self) -> str:
        return self._session.get_providers()[0] if getattr(self, "_session", None) else "?"

    def _prepare(self, loaded: LoadedModel, progress: Progress) -> None:
        import onnxruntime as ort

        export = self._export(loaded, progress)
        providers = ort_providers(self.options)
        path = export.path
        if self.options.precision == "int8" and providers[0] == "CPUExecutionProvider":
            progress("Quantising to int8 (static, calibrated on the sample photos; cached)…", 0.4)
            path = str(quantize_int8(export))
        progress("Creating the ONNX Runtime session (graph optimisation)…", 0.6)
        if "CUDAExecutionProvider" in providers and hasattr(ort, "preload_dlls"):
            # onnxruntime-gpu dlopens CUDA/cuDNN lazily; preload the ones PyTorch's wheels ship
            # (nvidia-* site-packages), or the provider silently falls back to the CPU.
            ort.preload_dlls()
        try:
            self._session = ort.InferenceSession(path, session_options(self.options),
                                                 providers=_with_provider_options(providers, self.options))
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise BackendError(f"ONNX Runtime could not load the model: {short_error(exc)}") from exc
        if not _ort_precision_runs(self.options.precision, self.provider):
            raise BackendError(f"{self.options.precision} with ONNX Runtime needs the MIGraphX execution "
                               f"provider (ran on {self.provider}); use precision fp32 or the MIGraphX backend")
        # The names come from the file (what the exporter derived from the model), never assumed.
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name
        progress("Ready", 1.0)

    def run(self, batch: torch.Tensor) -> torch.Tensor:
        array = np.ascontiguousarray(batch.detach().cpu().numpy(), dtype=np.float32)
        (logits,) = self._session.run([self._output], {self._input: array})
        return torch.from_numpy(np.asarray(logits, dtype=np.float32))


def _ort_precision_runs(precision: str, provider: str) -> bool:
    """fp32 runs everywhere; int8 on the CPU provider (a statically quantised QDQ model) or through
    MIGraphX; fp16 only through MIGraphX (the CPU provider has no fast fp16 convolutions)."""
    return (precision == "fp32" or provider == "MIGraphXExecutionProvider"
            or (precision == "int8" and provider == "CPUExecutionProvider"))


def ort_providers(options: BackendOptions) -> list[str]:
    """The available execution providers for `options.target`, most preferred first."""
    import onnxruntime as ort

    present = set(ort.get_available_providers())
    ordered = [p for p in ORT_PROVIDER_PREFERENCE if p in present]
    if options.target == "cpu":
        return ["CPUExecutionProvider"]
    if options.target == "gpu" and not ORT_GPU_PROVIDERS & present:
        raise BackendUnavailable("no GPU execution provider in this onnxruntime build "
                                 f"(has {', '.join(sorted(present))}); install onnxruntime-rocm or -migraphx")
    return ordered  # "auto" and "gpu": the GPU providers first, the CPU as the fallback


def _with_provider_options(providers: list[str], options: BackendOptions) -> list:
    out: list = []
    for provider in providers:
        if provider == "MIGraphXExecutionProvider":
            out.append((provider, {"migraphx_fp16_enable": str(int(options.precision == "fp16")),
                                   "migraphx_int8_enable": str(int(options.precision == "int8")),
                                   "migraphx_exhaustive_tune": str(int(options.exhaustive_tune))}))
        else:
            out.append(provider)
    return out


def session_options(options: BackendOptions):
    """ORT SessionOptions: the requested graph optimisation level and thread counts."""
    import onnxruntime as ort

    levels = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[options.graph_optimization]
    so.intra_op_num_threads = options.intra_op_threads
    so.inter_op_num_threads = options.inter_op_threads
    so.log_severity_level = 3  # errors only: fallback warnings are reported through `provider`
    return so


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
    (kiosk.fastest_runner) picks it only when it measures faster on the machine at hand."""
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


def backend_label(name: str, provider: str | None = None) -> str:
    """A bench row's or a prepared backend's name for people: "MIGraphX (CPU)" for provider migraphx:cpu."""
    if name == "migraphx" and provider:
        return MIGRAPHX_TITLES.get(provider.split(":", 1)[-1].split()[0], MigraphxBackend.title)
    return BACKENDS[name].title if name in BACKENDS else name


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
    if backend.name == "torch" and not backend.options.torch_compile:
        return loaded
    return replace(loaded, model=BackendModule(backend), label=f"{loaded.label} · {backend.title}")


def agreement(reference: torch.Tensor, logits: torch.Tensor, k: int = 5) -> dict[str, float]:
    """How closely `logits` follow the reference (PyTorch eager) on the same batch, both (B, C).

    top1_agree: fraction of rows with the same arg-max; top5_agree: fraction whose top-k
    index sets are equal (order inside the top-k is ignored: near-ties may swap)."""
    reference, logits = reference.float(), logits.float()
    k = min(k, reference.shape[1])
    same_top1 = reference.argmax(dim=1) == logits.argmax(dim=1)
    ref_top = reference.topk(k, dim=1).indices.sort(dim=1).values
    top = logits.topk(k, dim=1).indices.sort(dim=1).values
    return {"max_abs_diff": float((reference - logits).abs().max()),
            "top1_agree": float(same_top1.float().mean()),
            "top5_agree": float((ref_top == top).all(dim=1).float().mean())}


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
