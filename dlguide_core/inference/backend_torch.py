"""PyTorch as a backend: eager on the model's own device (the baseline), or through torch.compile.

torch.compile never runs in this process: it traces the model, and tracing changes process-wide state
under every other thread's inference (issue 18). The compiled model lives in a child process
(`compile_child.CompiledProcess`) that compiles it and then runs the batches; its latency includes
passing each batch through a pipe."""

from __future__ import annotations

import os

import torch

from dlguide_core.inference import specs
from dlguide_core.inference.backend_base import (
    Availability,
    Backend,
    BackendOptions,
    Outputs,
    Progress,
    eager_outputs,
    sample_batch,
)
from dlguide_core.inference.compile_child import CompiledProcess
from dlguide_core.vision.models import LoadedModel


class TorchBackend(Backend):
    """PyTorch eager on the model's own device: the baseline every other backend is compared with."""

    name, title = specs.TORCH, specs.label(specs.TORCH)
    _compiled: CompiledProcess | None = None  # the torch.compile child, once prepared with a compile backend
    compile_imports: tuple[str, ...] = ()  # modules the child imports first (a compile backend's registration)

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
        if self._compiled is not None:
            return self._compiled.provider
        return f"{device} (torch.compile {self.compile_backend})" if self.compile_backend else device

    @property
    def on_gpu(self) -> bool:
        return self.loaded is not None and self.loaded.device.type == "cuda"

    def _prepare(self, loaded: LoadedModel, progress: Progress) -> None:
        self._device = loaded.device
        self._module = loaded.model  # fp32 only: `availability` refuses other precisions
        if self.compile_backend:
            progress(f"torch.compile (backend {self.compile_backend}) and first run, in a process of its own…", 0.3)
            # The child compiles its own copy: the cached LoadedModel is never touched. CompileError is a
            # BackendError (one line).
            self._compiled = CompiledProcess(loaded, self.compile_backend, sample_batch(loaded, self.batch_size),
                                             imports=self.compile_imports)
        progress("Ready", 1.0)

    def run(self, batch: torch.Tensor) -> torch.Tensor:
        if self._compiled is not None:
            return self._compiled.run(batch)
        with torch.inference_mode():
            return self._module(batch.to(self._device)).float().cpu()

    def run_features(self, batch: torch.Tensor) -> Outputs:
        """Eager: the body's features and the head's matmul, one forward. The torch.compile child gives logits
        only, so a compiled model's features come from the eager model (the base class's fallback)."""
        assert self.loaded is not None, "prepare the backend first"
        return eager_outputs(self.loaded, batch)


def torch_compile_status() -> tuple[bool, str]:
    """torch.compile needs dynamo support and, for the CPU (inductor), a C++ compiler."""
    import shutil

    if not _dynamo_supported():
        return False, "torch.compile is not supported on this Python/platform"
    if not torch.cuda.is_available() and not shutil.which(os.environ.get("CXX", "g++")):
        return False, "torch.compile on the CPU needs a C++ compiler (g++) on PATH"
    return True, f"torch.compile available (torch {torch.__version__}); the first run compiles (minutes on a CPU)"


def _dynamo_supported() -> bool:
    """torch._dynamo.is_dynamo_supported() where dynamo is loaded already. Elsewhere (a server: it compiles only in
    a child, CompiledProcess) importing dynamo to ask would cost 1.5 s of CPU and about 150 MB of RSS (measured on
    the 2-core box), so the question is whether this torch was built with dynamo's frame evaluator; the child's
    torch.compile runs dynamo's own check and a refusal reaches the page as a CompileError in one line."""
    import sys

    if "torch._dynamo" in sys.modules:
        return bool(torch._dynamo.is_dynamo_supported())
    return hasattr(torch._C, "_dynamo")
