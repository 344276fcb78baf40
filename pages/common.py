"""UI helpers shared by the pages: cached core objects and the prediction display.

Everything here is Streamlit glue; all logic lives in dlguide_core.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dlguide_core import devices
from dlguide_core.classify import ImageResult
from dlguide_core.models import LoadedModel, load_model


@st.cache_data(ttl=300, show_spinner=False)
def device_report(include_tensorflow: bool = False) -> devices.DeviceReport:
    return devices.collect(include_tensorflow=include_tensorflow)


def device_label() -> str:
    return devices.summary_label(device_report())


@st.cache_resource(show_spinner="Loading model…", max_entries=4)
def cached_model(weights: str, _version: float = 0.0) -> LoadedModel:
    """One LoadedModel per weights source (and checkpoint mtime); never mutated after caching."""
    return load_model(weights)


def get_model(weights: str) -> LoadedModel:
    path = Path(weights)
    version = path.stat().st_mtime if weights not in ("imagenet", "none") and path.is_file() else 0.0
    return cached_model(weights, version)


def weights_caption(loaded: LoadedModel) -> None:
    if loaded.trained:
        st.caption(f"Weights: **{loaded.label}** · {loaded.arch} · {len(loaded.class_names)} classes")
    else:
        st.warning(f"Weights: **{loaded.label}**. This model is untrained: its predictions are noise.",
                   icon="⚠️")


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
        st.error(result.error, icon="🚫")
        return
    left, right = st.columns([1, 2])
    with left:
        if image is not None:
            st.image(image, caption=result.image, width="stretch")
    with right:
        st.dataframe(predictions_frame(result), hide_index=True, width="stretch", key=f"{key}_table")
        st.plotly_chart(predictions_chart(result), key=f"{key}_chart", config={"displayModeBar": False})
