"""What the CPU inference benches share: the guide's own eager path, the machine's fp32 matmul peak and the FLOPs of
a forward (the compute floor), stand-in weights in TORCH_HOME, and the hold-out photos for agreement checks."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path

import torch

from tests.support.paths import SHARED_TINY

HOLDOUT = SHARED_TINY / "val" / "images"  # val photos never used for int8 calibration (absent on a fresh clone)


class GuideEager:
    """PyTorch eager exactly as the guide runs it: NCHW (contiguous) tensors, torch.no_grad."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = copy.deepcopy(model).to(memory_format=torch.contiguous_format)

    def run(self, batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.model(batch.contiguous())


def standin_weights() -> str:
    """imagenet when cached, else a TORCH_HOME holding the stand-in weights (a real softmax spread, so int8
    agreement means something; latency does not depend on the values), set in this process. Returns a label."""
    from dlguide_core.vision.models import imagenet_weights_path
    from tests.support.standin_weights import standin_imagenet_state

    if imagenet_weights_path().is_file():
        return "ImageNet weights"
    home = Path(os.environ.get("TMPDIR", "/tmp")) / "dlguide_bench_torch_home"
    (home / "hub" / "checkpoints").mkdir(parents=True, exist_ok=True)
    torch.save(standin_imagenet_state(), home / "hub" / "checkpoints" / imagenet_weights_path().name)
    os.environ["TORCH_HOME"] = str(home)
    return "stand-in random weights (ImageNet's are not cached here)"


def forward_flops(model: torch.nn.Module, batch: torch.Tensor) -> int:
    """FLOPs of one forward pass (a multiply-add counts 2), as PyTorch's own counter sees the model."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(batch)
    return int(counter.get_total_flops())


def matmul_gflops(size: int = 2048) -> dict[str, float]:
    """GFLOP/s of one (size x size) @ (size x size) fp32 product, torch (oneDNN/MKL) and numpy (OpenBLAS)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    an, bn = a.numpy(), b.numpy()
    out = {}
    for name, fn in (("torch.mm", lambda: torch.mm(a, b)), ("numpy matmul", lambda: an @ bn)):
        fn()  # warm the library's thread pool
        start = time.perf_counter()
        fn()
        out[name] = 2 * size**3 / (time.perf_counter() - start) / 1e9
    return out
