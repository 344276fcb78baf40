"""ONNX Runtime as a backend: the ONNX export run with the best execution provider present.

onnxruntime is loaded (onnxruntime_lib: its telemetry off) inside the functions that need it: without it,
`availability` says so.
int8 on the CPU provider runs the statically quantised copy of the export (`quantize.quantize_int8`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dlguide_core import migraphx_lib, onnxruntime_lib, threads
from dlguide_core.errors import error_summary
from dlguide_core.inference import specs
from dlguide_core.inference.backend_base import (
    Availability,
    Backend,
    BackendError,
    BackendOptions,
    BackendUnavailable,
    Outputs,
    Progress,
)
from dlguide_core.inference.quantize import quantize_int8
from dlguide_core.vision.models import LoadedModel

# ONNX Runtime execution providers, most preferred first (CPU is always last and always there).
ORT_PROVIDER_PREFERENCE = ("MIGraphXExecutionProvider", "ROCMExecutionProvider", "CUDAExecutionProvider",
                           "CPUExecutionProvider")
ORT_GPU_PROVIDERS = frozenset(ORT_PROVIDER_PREFERENCE[:3])


class OnnxRuntimeBackend(Backend):
    """ONNX Runtime with the best execution provider present and full graph optimisation."""

    name, title = specs.ONNXRUNTIME, specs.label(specs.ONNXRUNTIME)

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        try:
            onnxruntime = onnxruntime_lib.load()
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

    @property
    def on_gpu(self) -> bool:
        return self.provider in ORT_GPU_PROVIDERS

    def precompile(self, loaded: LoadedModel, *, batch_size: int = 1, progress: Progress | None = None) -> None:
        self._export(loaded, progress or (lambda _msg, _frac: None))  # the session itself is quick to create

    def _prepare(self, loaded: LoadedModel, progress: Progress) -> None:
        ort = onnxruntime_lib.load()

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
        if "MIGraphXExecutionProvider" in providers:
            migraphx_lib.quiet_logs()  # the provider's libmigraphx logs as the module does
        try:
            self._session = ort.InferenceSession(path, session_options(self.options),
                                                 providers=_with_provider_options(providers, self.options))
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise BackendError(f"ONNX Runtime could not load the model: {error_summary(exc)}") from exc
        if not _ort_precision_runs(self.options.precision, self.provider):
            raise BackendError(f"{self.options.precision} with ONNX Runtime needs the MIGraphX execution "
                               f"provider (ran on {self.provider}); use precision fp32 or the MIGraphX backend")
        # The names come from the file (what the exporter derived from the model), never assumed.
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name
        outputs = {o.name for o in self._session.get_outputs()}
        self._features = export.features_name if export.features_name in outputs else None
        progress("Ready", 1.0)

    def run(self, batch: torch.Tensor) -> torch.Tensor:
        array = np.ascontiguousarray(batch.detach().cpu().numpy(), dtype=np.float32)
        (logits,) = self._session.run([self._output], {self._input: array})
        return torch.from_numpy(np.asarray(logits, dtype=np.float32))

    def run_features(self, batch: torch.Tensor) -> Outputs:
        """Both outputs of the export in one run (its second output: export_child.add_features_output)."""
        if self._features is None:
            return super().run_features(batch)
        array = np.ascontiguousarray(batch.detach().cpu().numpy(), dtype=np.float32)
        logits, features = self._session.run([self._output, self._features], {self._input: array})
        return Outputs(torch.from_numpy(np.asarray(logits, dtype=np.float32)),
                       torch.from_numpy(np.asarray(features, dtype=np.float32)).flatten(1))


def _ort_precision_runs(precision: str, provider: str) -> bool:
    """fp32 runs everywhere; int8 on the CPU provider (a statically quantised QDQ model) or through
    MIGraphX; fp16 only through MIGraphX (the CPU provider has no fast fp16 convolutions)."""
    return (precision == "fp32" or provider == "MIGraphXExecutionProvider"
            or (precision == "int8" and provider == "CPUExecutionProvider"))


def ort_providers(options: BackendOptions) -> list[str]:
    """The available execution providers for `options.target`, most preferred first."""
    ort = onnxruntime_lib.load()

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


def session_options(options: BackendOptions) -> Any:
    """ORT SessionOptions: the requested graph optimisation level and thread counts."""
    ort = onnxruntime_lib.load()

    levels = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
              "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}
    so = ort.SessionOptions()
    so.graph_optimization_level = levels[options.graph_optimization]
    so.intra_op_num_threads = options.intra_op_threads
    so.inter_op_num_threads = options.inter_op_threads
    so.log_severity_level = 3  # errors only: fallback warnings are reported through `provider`
    # Workers block between parallel sections instead of spin-waiting (dlguide_core.threads decides, per process).
    # bench/bench_cpu_floor.py (issue 26), Inception v3 batch 1 on the shared 2-core box: p50 1.9-2.1x lower
    # without spinning; sequential execution, level "all" (its NCHWc layout: 1.2-1.5x) and ORT's thread default
    # (physical cores) stay.
    for key, value in threads.ort_session_config().items():
        so.add_session_config_entry(key, value)
    return so
