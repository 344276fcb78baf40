"""The inference backends, each declared once: its name, its label for people, where it runs and its place in
the measured speed ranking (docs/BENCHMARKS.md). Imports nothing heavy: `python -m dlguide_core --help` reads
the backend choices from here without loading torch.

A backend's behaviour (availability, precisions, preparation) is its class in `backend_<name>.py`, found by
that module name (`registry`). Adding a backend is that module plus one `BackendSpec` in SPECS
(docs/ARCHITECTURE.md, "Add a backend"). These string constants are the only place a backend's name is spelled
out in the code (tests/test_architecture.py): it is a contract (`bench --backends`, the `backend` of bench rows,
DLGUIDE_KIOSK_BACKEND).
"""

from __future__ import annotations

from dataclasses import dataclass

TORCH, ONNXRUNTIME, MIGRAPHX, ZENTORCH = "torch", "onnxruntime", "migraphx", "zentorch"
BASELINE = TORCH  # what every other backend is compared with, and what runs when nothing else does
PRECISIONS = ("fp32", "fp16", "bf16", "int8")  # bf16: MIGraphX only (quantize_bf16)
TARGETS = ("auto", "gpu", "cpu")


@dataclass(frozen=True)
class Ranked:
    """One way a backend runs (a target and precision) and its place in the speed ranking.

    `choice.fastest_available` takes the first untimed entry, by `place`, that can run here. On a CPU host the
    `timed` entries are then timed against it by the booth (`booth.fastest_measured`): the lowest p50 wins,
    among those that agree with eager PyTorch (`checked`: its top-1 is compared on the check photos first)."""

    place: int
    target: str  # gpu or cpu
    why: str  # the reason shown for the pick; "{reason}" is the backend's availability reason
    precision: str = "fp32"
    timed: bool = False
    checked: bool = False
    when: str = ""  # where a timed entry is timed at all, in words (its class's `contends` decides)


@dataclass(frozen=True)
class BackendSpec:
    name: str
    label: str  # what the UI, `bench` and the booth call it
    ranks: tuple[Ranked, ...] = ()
    target_labels: tuple[tuple[str, str], ...] = ()  # (target, label) where the target changes what runs
    slow_setup: str = ""  # why preparing it takes minutes (a compile): such a backend is opt-in, and says so

    def label_for(self, target: str | None = None) -> str:
        return dict(self.target_labels).get(target or "", self.label)


SPECS: tuple[BackendSpec, ...] = (
    BackendSpec(TORCH, "PyTorch (eager)", (
        Ranked(30, "gpu", "PyTorch eager on the GPU (no compiled GPU runtime here)"),
        Ranked(90, "cpu", "PyTorch eager (no compiled runtime installed)"))),
    BackendSpec(ONNXRUNTIME, "ONNX Runtime", (
        Ranked(20, "gpu", "ONNX Runtime on a GPU provider ({reason})"),
        # fp32: ~1.8x the guide's eager PyTorch on the CPU, same answers; int8 ~2x faster again, approximate
        Ranked(40, "cpu", "ONNX Runtime on the CPU"),
        Ranked(50, "cpu", "ONNX Runtime int8 (static QDQ, calibrated on the samples)", "int8", timed=True,
               checked=True))),
    BackendSpec(MIGRAPHX, "MIGraphX", (
        Ranked(10, "gpu", "MIGraphX compiled for the AMD GPU"),
        # 1.5-2x slower than ORT fp32 on this CPU; checked against eager when it compiles
        Ranked(60, "cpu", "MIGraphX (CPU) ({reason})", timed=True)),
        target_labels=(("gpu", "MIGraphX (GPU)"), ("cpu", "MIGraphX (CPU)"))),
    BackendSpec(ZENTORCH, "zentorch", (
        # AMD's ZenDNN plugin for torch.compile (docs/BENCHMARKS.md); checked: other kernels than eager's
        Ranked(70, "cpu", "zentorch: torch.compile with ZenDNN ({reason})", timed=True, checked=True,
               when="with DLGUIDE_KIOSK_ZENTORCH=1, where the CPU has AVX-512"),),
        # 345 s under load on the shared 2-core box (docs/BENCHMARKS.md); a default benchmark took 9 minutes
        slow_setup="torch.compile with ZenDNN compiles for minutes on a CPU"),
)
SPEC = {spec.name: spec for spec in SPECS}
NAMES = tuple(SPEC)  # the `bench --backends` choices, in this order


def label(name: str, target: str | None = None) -> str:
    """A backend's name for people ("MIGraphX (CPU)" for target cpu); an unknown name as it is."""
    return SPEC[name].label_for(target) if name in SPEC else name


def quick(name: str) -> bool:
    """Whether backend `name` is ready in seconds (no minutes-long compile): the benchmark's default choices."""
    return not (name in SPEC and SPEC[name].slow_setup)


def ranking() -> list[tuple[str, Ranked]]:
    """Every (backend name, ranked variant), by place: the order `choice` tries them in."""
    return sorted(((spec.name, r) for spec in SPECS for r in spec.ranks), key=lambda pair: pair[1].place)
