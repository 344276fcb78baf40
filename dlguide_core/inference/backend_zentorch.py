"""zentorch as a backend: AMD's PyTorch plugin for EPYC CPUs (ZenDNN), `torch.compile(model, backend="zentorch")`.

The guide's "MIGraphX can also target CPU using ... ZenDNN", made real for PyTorch. Optional: available where the
`zentorch` package (versioned with torch: zentorch 2.14.x for torch 2.14) is installed; it is imported only when a
model is prepared, since importing it registers its compiler backend and loads ZenDNN (seconds). Preparing runs the
same path as PyTorch's own torch.compile (`TorchBackend._prepare`: a compile child process that imports zentorch,
compiles and then serves the batches), so neither its trace nor ZenDNN ever enters the serving process. Its
optimisations need AVX-512 (it warns so without): on a CPU without it, zentorch measured slower than eager PyTorch
(docs/BENCHMARKS.md), so the booth times it only where the CPU has AVX-512 (`contends`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os

import torch

from dlguide_core.inference import specs
from dlguide_core.inference.backend_base import Availability, BackendError, BackendOptions, Progress
from dlguide_core.inference.backend_torch import TorchBackend, torch_compile_status
from dlguide_core.vision.models import LoadedModel


class ZentorchBackend(TorchBackend):
    """torch.compile with zentorch's backend, fp32 on the CPU."""

    name, title = specs.ZENTORCH, specs.label(specs.ZENTORCH)

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        options = options or BackendOptions()

        def state(ok: bool, reason: str) -> Availability:
            return Availability(cls.name, cls.title, ok, reason)

        if importlib.util.find_spec(cls.name) is None:  # the package is named like the backend
            return state(False, f"module {cls.name} not installed (pip install {cls.name}, the release of your torch)")
        if options.precision != "fp32":
            return state(False, f"{cls.title} runs fp32 here; fp16/bf16/int8 need MIGraphX")
        if options.target == "gpu":
            return state(False, f"{cls.title} runs on the CPU only (ZenDNN); use target cpu or auto")
        ok, reason = torch_compile_status()
        if not ok:
            return state(False, reason)
        return state(True, f"{cls.name} {importlib.metadata.version(cls.name)} with torch {torch.__version__} on "
                           f"the CPU ({cpu_capability()}); the first run compiles (minutes on a CPU)")

    @classmethod
    def contends(cls, options: BackendOptions) -> str | None:
        # Timing it means compiling Inception first: minutes on a CPU, before the booth's port opens. A booth
        # must open in seconds, so it is timed only when asked (DLGUIDE_KIOSK_ZENTORCH=1, README).
        if os.environ.get("DLGUIDE_KIOSK_ZENTORCH", "").strip().lower() not in {"1", "true", "yes", "on"}:
            return "its compile takes minutes; set DLGUIDE_KIOSK_ZENTORCH=1 to time it when the booth starts"
        capability = cpu_capability()
        return None if capability.startswith("AVX512") else f"its optimisations need AVX-512 (this CPU: {capability})"

    compile_imports = (specs.ZENTORCH,)  # importing zentorch registers its torch.compile backend

    @property
    def compile_backend(self) -> str:
        return self.name  # importing zentorch registers its torch.compile backend under this name

    def _prepare(self, loaded: LoadedModel, progress: Progress) -> None:
        if loaded.device.type != "cpu":
            raise BackendError(f"{self.title} runs on the CPU; this model is on {loaded.device}")
        # zentorch is imported only in the compile child (compile_imports): ZenDNN never loads in the serving
        # process, where it would break MIGraphX's cpu target if MIGraphX had not run first ("could not execute a
        # primitive", migraphx 2.16 beside zentorch 2.14.0.1 here). A zentorch that does not load is the child's
        # one-line error.
        super()._prepare(loaded, progress)


def cpu_capability() -> str:
    """The widest vector instructions PyTorch found on this CPU ("AVX2", "AVX512", ...)."""
    return torch.backends.cpu.get_cpu_capability()
