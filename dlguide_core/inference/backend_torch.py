"""PyTorch as a backend: eager on the model's own device (the baseline), or through torch.compile."""

from __future__ import annotations

import os

import torch

from dlguide_core.errors import error_summary
from dlguide_core.inference import names
from dlguide_core.inference.backend_base import (
    Availability,
    Backend,
    BackendError,
    BackendOptions,
    Progress,
    sample_batch,
)
from dlguide_core.vision.models import LoadedModel


class TorchBackend(Backend):
    """PyTorch eager on the model's own device: the baseline every other backend is compared with."""

    name, title = names.TORCH, names.label(names.TORCH)

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
    def compile_backend(self) -> str | None:
        """The torch.compile backend the model runs through; None for eager."""
        return self.options.torch_compile

    @property
    def provider(self) -> str:
        device = str(self.loaded.device) if self.loaded else "?"
        return f"{device} (torch.compile {self.compile_backend})" if self.compile_backend else device

    @property
    def on_gpu(self) -> bool:
        return self.loaded is not None and self.loaded.device.type == "cuda"

    def _prepare(self, loaded: LoadedModel, progress: Progress) -> None:
        self._device = loaded.device
        self._module = loaded.model  # fp32 only: `availability` refuses other precisions
        if self.compile_backend:
            progress(f"torch.compile (backend {self.compile_backend}) and first run…", 0.3)
            # A new wrapper: the cached LoadedModel itself is never modified.
            self._module = torch.compile(loaded.model, backend=self.compile_backend)
            try:
                self.run(sample_batch(loaded, self.batch_size))  # compilation happens on the first call
            except Exception as exc:
                raise BackendError(f"torch.compile failed: {error_summary(exc)}") from exc
        progress("Ready", 1.0)

    @torch.inference_mode()
    def run(self, batch: torch.Tensor) -> torch.Tensor:
        return self._module(batch.to(self._device)).float().cpu()


def torch_compile_status() -> tuple[bool, str]:
    """torch.compile needs dynamo support and, for the CPU (inductor), a C++ compiler."""
    import shutil

    if not torch._dynamo.is_dynamo_supported():
        return False, "torch.compile is not supported on this Python/platform"
    if not torch.cuda.is_available() and not shutil.which(os.environ.get("CXX", "g++")):
        return False, "torch.compile on the CPU needs a C++ compiler (g++) on PATH"
    return True, f"torch.compile available (torch {torch.__version__}); the first run compiles (minutes on a CPU)"
