"""Choosing an inference backend (Classify, Compiled): the backend and precision pickers and their labels.
What can run here comes from dlguide_core.inference (registry, choice); the prepared backends are cached in ui.cache."""

from __future__ import annotations

import streamlit as st

BACKEND_LABELS = {"torch": "PyTorch (eager)", "onnxruntime": "ONNX Runtime", "migraphx": "MIGraphX"}


def backend_selectbox(key: str, label: str = "Backend") -> str:
    """PyTorch first (the default), then each compiled backend that can run here."""
    from dlguide_core.inference.choice import backend_choices
    from dlguide_core.inference.registry import backend_status

    titles = {s.name: s.title for s in backend_status()}  # "MIGraphX (CPU)" on a host without an AMD GPU
    return st.selectbox(label, backend_choices(), key=key, format_func=lambda n: titles.get(n, n),
                        help="ONNX Runtime / MIGraphX run an exported, optimised graph: faster than eager "
                             "PyTorch on this kind of machine (see the Compiled inference page).")


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
