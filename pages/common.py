"""UI helpers shared by the pages: cached core objects and the prediction display.

Everything here is Streamlit glue; all logic lives in dlguide_core.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dlguide_core import devices
from dlguide_core.vision.classify import ImageResult
from dlguide_core.vision.models import LoadedModel, load_model


@st.cache_data(ttl=300, show_spinner=False)
def device_report(include_tensorflow: bool = False) -> devices.DeviceReport:
    return devices.collect(include_tensorflow=include_tensorflow)


def device_label() -> str:
    return devices.summary_label(device_report())


@st.cache_resource(show_spinner="Loading model…", max_entries=4)
def cached_model(weights: str, version: str = "") -> LoadedModel:
    """One LoadedModel per weights source and checkpoint file version; never mutated after caching.

    `version` (file_version) is a plain-named argument: it is part of the cache key (a `_name` would not be)."""
    return load_model(weights)


def file_version(weights: str) -> str:
    """What changes when a checkpoint is rewritten at the same path: mtime (ns), size and inode
    (save_checkpoint writes a temp file then os.replace()s it, so even a same-tick rewrite is a new inode)."""
    path = Path(weights)
    if weights in ("imagenet", "none") or not path.is_file():
        return ""
    stat = path.stat()
    return f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}"


def get_model(weights: str) -> LoadedModel:
    return cached_model(weights, file_version(weights))


def weights_caption(loaded: LoadedModel) -> None:
    if loaded.trained:
        st.caption(f"Weights: **{loaded.label}** · {loaded.arch} · {len(loaded.class_names)} classes")
    else:
        st.warning(f"Weights: **{loaded.label}**. This model is untrained: its predictions are noise.",
                   icon=":material/warning:")


# ---------------------------------------------------------------- choosing weights (Classify, Compiled)

WEIGHT_LABELS = {"imagenet": "ImageNet (pretrained)", "none": "none (untrained, random init)"}


def weights_selectbox(key: str, label: str = "Weights", default: str | None = None) -> str:
    """ImageNet, untrained, then each job checkpoint found; `default` is preselected when it is listed."""
    from dlguide_core.vision.models import available_weights

    options = available_weights()
    return st.selectbox(label, options, index=options.index(default) if default in options else 0, key=key,
                        format_func=lambda w: WEIGHT_LABELS.get(w, f"checkpoint: {w}"))


def require_weights(weights: str, key_prefix: str, hint: str) -> None:
    """Stop the page when the ImageNet weights are not cached: say where they go and offer a download
    button (`{key_prefix}_download_weights`) with a progress bar. Never downloads on a plain rerun."""
    from dlguide_core.errors import WeightsUnavailable
    from dlguide_core.vision.models import (
        IMAGENET_FILENAME,
        IMAGENET_WEIGHTS,
        fetch_imagenet_weights,
        imagenet_weights_path,
    )

    if weights != "imagenet" or imagenet_weights_path().is_file():
        return
    st.warning(f"The ImageNet weights `{IMAGENET_FILENAME}` are not cached at `{imagenet_weights_path()}`. "
               f"Download them here (about 104 MB), or copy the file from {IMAGENET_WEIGHTS.url} to that path.",
               icon=":material/download:")
    if st.button("Download the ImageNet weights", key=f"{key_prefix}_download_weights"):
        bar = st.progress(0.0, text=f"Downloading {IMAGENET_FILENAME}")
        try:
            fetch_imagenet_weights(lambda done, total: bar.progress(min(done / total, 1.0) if total else 0.0))
            st.rerun()
        except WeightsUnavailable as exc:
            st.error(str(exc), icon=":material/block:")
    st.info(hint)
    st.stop()


def require_model(weights: str, key_prefix: str, hint: str) -> LoadedModel:
    """The cached model for `weights`, captioned; the page stops with a one-line reason when it cannot load."""
    from dlguide_core.errors import DlguideError

    require_weights(weights, key_prefix, hint)
    try:
        loaded = get_model(weights)
    except DlguideError as exc:
        st.error(f"Cannot load these weights: {exc}", icon=":material/block:")
        st.stop()
    weights_caption(loaded)
    return loaded


def predictions_frame(result: ImageResult) -> pd.DataFrame:
    return pd.DataFrame(
        [{"rank": i + 1, "label": p.label, "index": p.index, "probability": round(p.prob, 4)}
         for i, p in enumerate(result.top)]
    )


def predictions_chart(result: ImageResult, height: int = 260) -> go.Figure:
    labels = [p.label for p in reversed(result.top)]
    probs = [p.prob for p in reversed(result.top)]
    fig = go.Figure(go.Bar(x=probs, y=labels, orientation="h", text=[f"{p:.1%}" for p in probs],
                           textposition="auto", marker_color="#ED1C24"))
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10), xaxis=dict(range=[0, 1],
                      tickformat=".0%"), yaxis=dict(automargin=True))
    return fig


def show_result(result: ImageResult, image, key: str) -> None:
    """One image beside its top-k table and bar chart, or its error."""
    if result.error:
        st.error(result.error, icon=":material/block:")
        return
    left, right = st.columns([1, 2])
    with left:
        if image is not None:
            st.image(image, caption=result.image, width="stretch")
    with right:
        st.dataframe(predictions_frame(result), hide_index=True, width="stretch", key=f"{key}_table",
                     column_config={"probability": st.column_config.ProgressColumn(
                         "probability", min_value=0.0, max_value=1.0, format="percent")})
        st.plotly_chart(predictions_chart(result), key=f"{key}_chart", config={"displayModeBar": False})


# ---------------------------------------------------------------- Booth mode (issue 7)


@st.cache_resource(show_spinner="Preparing the booth model (a one-time compile)…", max_entries=4)
def _cached_kiosk_runner(fingerprint: str, source: str, choice: str, _loaded: LoadedModel):
    from dlguide_core.booth import fastest_runner

    return fastest_runner(_loaded)


def kiosk_runner(loaded: LoadedModel):
    """The booth's predictor for `loaded`: the fastest available backend, prepared once per model."""
    from dlguide_core.booth import backend_choice

    return _cached_kiosk_runner(loaded.fingerprint, loaded.source, backend_choice(), loaded)


@st.cache_resource(show_spinner="Classifying the sample photos…", max_entries=8)
def _cached_attract_items(fingerprint: str, backend: str, _loaded: LoadedModel, _runner) -> list:
    from dlguide_core.booth import attract_items as compute

    return compute(_loaded, _runner)


def attract_items(loaded: LoadedModel, runner) -> list:
    """The bundled samples with their predictions, computed once per model and backend."""
    return _cached_attract_items(loaded.fingerprint, runner.backend, loaded, runner)


@st.cache_resource(show_spinner=False, max_entries=4)
def _cached_job_store(path: str):
    from dlguide_core.jobs.store import JobStore

    return JobStore(path)


def kiosk_job_store():
    """The job store, read-only here; None when no job was ever created (the booth must not create one)."""
    from dlguide_core import settings

    path = settings.home() / "jobs.db"
    return _cached_job_store(str(path)) if path.is_file() else None


def loss_figure(steps: list, losses: list, height: int = 220) -> go.Figure:
    fig = go.Figure(go.Scatter(x=steps, y=losses, mode="lines", line=dict(color="#ED1C24", width=3)))
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10), xaxis_title="step",
                      yaxis_title="loss")
    return fig


def forget_uploaded_files(files: list) -> None:
    """Free a visitor's uploaded/captured files from Streamlit's in-memory store now, not at session end."""
    ids = [f.file_id for f in files if f is not None and getattr(f, "file_id", None)]
    if not ids:
        return
    from streamlit.runtime import get_instance
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    try:
        manager = get_instance().uploaded_file_mgr
    except RuntimeError:  # no runtime (AppTest): nothing is held beyond the session state just cleared
        return
    for file_id in ids:
        manager.remove_file(ctx.session_id, file_id)


# ---------------------------------------------------------------- training jobs (Train page)


@st.cache_resource(show_spinner=False)
def job_store(db_path: str):
    """One JobStore connection per database file (it locks internally; never mutated after caching)."""
    from dlguide_core.jobs.store import JobStore

    return JobStore(db_path)


def curve_figure(series: dict[str, tuple], title: str, *, log_y: bool = False, height: int = 300) -> go.Figure:
    """Line chart of several runs: {name: (x, y)} or {name: (x, y, dash)}; WebGL keeps 100k-step runs fluid."""
    fig = go.Figure()
    for name, data in series.items():
        x, y = data[0], data[1]
        dash = data[2] if len(data) > 2 else "solid"
        fig.add_trace(go.Scattergl(x=x, y=y, mode="lines", name=name, line=dict(dash=dash, width=1.5)))
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=40, b=10), hovermode="x unified",
                      legend=dict(orientation="h", y=-0.2), yaxis_type="log" if log_y else "linear",
                      xaxis_title="step")
    flat = _flat_value(series)
    if flat and not log_y:  # a constant lr of 0.001 would otherwise sit on a -1..1 axis, looking like 0
        fig.update_yaxes(range=sorted((0.0, 2.0 * flat)))
    return fig


def _flat_value(series: dict[str, tuple]) -> float | None:
    """The value every finite point of every series shares, if they all share one."""
    import numpy as np

    values = np.concatenate([np.asarray(data[1], dtype=np.float64) for data in series.values()] or [np.empty(0)])
    values = values[np.isfinite(values)]
    return float(values[0]) if values.size and np.all(values == values[0]) else None


def training_loss_figure(runs: dict[str, dict[str, list]], smoothing: float, *, log_y: bool = False,
                max_points: int = 2000) -> go.Figure:
    """Per-step loss of each run: raw (faint, min/max-downsampled) and EMA-smoothed (solid)."""
    from dlguide_core.training.metrics import downsample, ema, stride

    fig = go.Figure()
    for name, cols in runs.items():
        raw_x, raw_y = downsample(cols["step"], cols["loss"], max_points)
        fig.add_trace(go.Scattergl(x=raw_x, y=raw_y, mode="lines", name=f"{name} raw", opacity=0.3,
                                   line=dict(width=1)))
        if smoothing > 0:
            sm_x, sm_y = stride(cols["step"], ema(cols["loss"], smoothing), max_points)
            fig.add_trace(go.Scattergl(x=sm_x, y=sm_y, mode="lines", name=f"{name} EMA {smoothing:.2f}",
                                       line=dict(width=2)))
    fig.update_layout(title="Training loss per step", height=340, margin=dict(l=10, r=10, t=40, b=10),
                      hovermode="x unified", legend=dict(orientation="h", y=-0.2), xaxis_title="step",
                      yaxis_type="log" if log_y else "linear")
    return fig


# ---------------------------------------------------------------- Compiled inference (issue 4)


@st.cache_resource(show_spinner="Preparing the backend…", max_entries=8)
def _cached_backend(name: str, fingerprint: str, source: str, options, batch_size: int, _loaded: LoadedModel):
    from dlguide_core.inference.registry import prepare_backend

    return prepare_backend(name, _loaded, batch_size=batch_size, options=options)


def get_backend(name: str, loaded: LoadedModel, options=None, batch_size: int = 1, progress=None):
    """A prepared backend (ONNX session, compiled MIGraphX program…), one per model, options and batch size;
    never mutated after caching. With `progress(message, fraction)`, the slow disk-cached steps (export,
    MIGraphX compile) run first outside the cache, since a cached function cannot draw progress."""
    from dlguide_core.inference.backend_base import BackendOptions
    from dlguide_core.inference.registry import precompile

    options = options or BackendOptions()
    if progress is not None:
        precompile(name, loaded, batch_size=batch_size, options=options, progress=progress)
    return _cached_backend(name, loaded.fingerprint, loaded.source, options, batch_size, loaded)


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


# ---------------------------------------------------------------- booth mode guard


def hide_in_kiosk() -> None:
    """Defence in depth for booth mode: a non-booth page reached by any route renders nothing."""
    from dlguide_core import settings

    if settings.kiosk_mode():
        st.info("This page is not available in booth mode.")
        st.stop()
