"""A classification result on screen: one image beside its top-k table and bar chart, or its error line."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dlguide_core.vision.classify import ImageResult
from dlguide_core.vision.result_files import RunInfo


def produced_by(run: RunInfo, titles: dict[str, str]) -> str:
    """"ONNX Runtime · fp32 · 23.4 ms per image": what produced a result, named by `titles`
    (dlguide_core.inference.registry.backend_status's titles)."""
    return f"{titles.get(run.backend, run.backend)} · {run.precision} · {run.latency_ms:.1f} ms per image"


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


def show_result(result: ImageResult, image, key: str, caption: str | None = None) -> None:
    """One image beside its top-k table and bar chart, or its error; `caption` (produced_by) under the table."""
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
        if caption:
            st.caption(caption)
        st.plotly_chart(predictions_chart(result), key=f"{key}_chart", config={"displayModeBar": False})
