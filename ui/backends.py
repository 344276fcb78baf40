"""Choosing an inference backend (Classify, Compiled): the backend and precision pickers and their labels.
What can run here comes from dlguide_core.inference (registry, choice); the prepared backends are cached in ui.cache."""

from __future__ import annotations

import streamlit as st


def backend_selectbox(key: str, label: str = "Backend", help: str | None = None) -> str:
    """PyTorch first (the default), then each compiled backend that can run here; `help` replaces the
    general help (the Classify page says what this machine measured)."""
    from dlguide_core.inference.choice import backend_choices
    from dlguide_core.inference.registry import backend_status

    titles = {s.name: s.title for s in backend_status()}  # "MIGraphX (CPU)" on a host without an AMD GPU
    return st.selectbox(label, backend_choices(), key=key, format_func=lambda n: titles.get(n, n),
                        help=help or "ONNX Runtime / MIGraphX run an exported, optimised graph: faster than "
                                     "eager PyTorch on this kind of machine (see the Compiled inference page).")


PRECISION_LABELS = {"fp32": "fp32 (same answers as PyTorch)",
                    "fp16": "fp16 (faster on GPUs, approximate)",
                    "int8": "int8 (fastest, approximate: see docs/BENCHMARKS.md)"}


def precision_options(backend: str, key: str):
    """A precision choice among those `backend` can run here; BackendOptions for it."""
    from dlguide_core.inference.backend_base import BackendOptions
    from dlguide_core.inference.choice import precision_choices

    choice = st.selectbox("Precision", precision_choices(backend), key=key,
                          format_func=lambda p: PRECISION_LABELS.get(p, p))
    return BackendOptions(precision=choice)


def ort_providers_text(present: tuple[str, ...]) -> str:
    """ONNX Runtime's providers as the Compiled page uses them (its preference order), then any it never uses."""
    from dlguide_core.inference.backend_onnxruntime import ORT_PROVIDER_PREFERENCE

    if not present:
        return "onnxruntime not installed"
    used = [p for p in ORT_PROVIDER_PREFERENCE if p in present]
    unused = [p for p in present if p not in ORT_PROVIDER_PREFERENCE]
    return ", ".join(used) + (f" (also in this build, not used here: {', '.join(unused)})" if unused else "")


def plain_target_error(target: str, error: str) -> str:
    """A MIGraphX target's loader error in words: the usual one is "no AMD GPU here", not a C++ source line."""
    if target == "gpu" and ("libmigraphx_gpu" in error or "dynamic_loader" in error or "/dev/kfd" in error):
        return "not on this machine: the gpu target needs an AMD GPU with ROCm (the cpu target runs instead)"
    return error
