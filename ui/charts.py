"""Plotly figures of training runs: the booth's loss ticker, the Train page's overlaid curves (per step and per
epoch), its smoothed per-step loss, and accuracy per class (a run's last epoch, an evaluation). Figures only: the
pages place them (st.plotly_chart, with their keys).

Every trace is SVG (go.Scatter), never WebGL (go.Scattergl): Plotly makes a WebGL context per WebGL plot it
draws, and a live page redraws its charts every few seconds; browsers keep about 16 contexts per page and drop
the oldest, blanking a chart (issue 31: 134 contexts made, 54 dropped, in 90 s of a running job's page). The
series are downsampled to a few thousand points first, which SVG draws without effort."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from dlguide_core.jobs.job import epoch_label
from dlguide_core.jobs.metric_tables import EpochRow

# one colour per run in every chart (Plotly's qualitative palette, in the order the runs were created)
PALETTE = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF",
           "#FECB52")
MANY_CLASSES = 40  # above this, axis labels give way to hover (200 names do not fit an axis)
MARKERS_UP_TO = 30  # a series this short gets markers: one epoch is a point, not an invisible line


def run_colors(run_ids: list[str]) -> dict[str, str]:
    """{run id: colour}, by position in `run_ids` (oldest first, so a new run never repaints the others)."""
    return {run_id: PALETTE[i % len(PALETTE)] for i, run_id in enumerate(run_ids)}


def _color_of(trace_name: str, colors: dict[str, str] | None) -> str | None:
    """A trace named "<run> ..." takes its run's colour (run names may have spaces: the longest that fits)."""
    if not colors:
        return None
    runs = [run for run in colors if trace_name == run or trace_name.startswith(run + " ")]
    return colors[max(runs, key=len)] if runs else None


def loss_figure(steps: list, losses: list, height: int = 220) -> go.Figure:
    fig = go.Figure(go.Scatter(x=steps, y=losses, mode="lines", line=dict(color="#ED1C24", width=3)))
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10), xaxis_title="step",
                      yaxis_title="loss")
    return fig


def curve_figure(series: dict[str, tuple], title: str, *, log_y: bool = False, height: int = 300,
                 colors: dict[str, str] | None = None) -> go.Figure:
    """Line chart of several runs: {name: (x, y)} or {name: (x, y, dash)}, already downsampled (SVG).
    A short series gets markers (a one-point epoch chart shows its point); `colors` maps run ids to colours."""
    fig = go.Figure()
    for name, data in series.items():
        x, y = data[0], data[1]
        dash = data[2] if len(data) > 2 else "solid"
        mode = "lines+markers" if len(x) <= MARKERS_UP_TO else "lines"
        fig.add_trace(go.Scatter(x=x, y=y, mode=mode, name=name, marker=dict(size=7),
                                   line=dict(dash=dash, width=1.5, color=_color_of(name, colors))))
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
                         max_points: int = 2000, colors: dict[str, str] | None = None) -> go.Figure:
    """Per-step loss of each run: raw (faint, min/max-downsampled) and EMA-smoothed (solid)."""
    from dlguide_core.training.metrics import downsample, ema, stride

    fig = go.Figure()
    for name, cols in runs.items():
        raw_x, raw_y = downsample(cols["step"], cols["loss"], max_points)
        color = _color_of(name, colors)
        mode = "lines+markers" if len(raw_x) <= 1 else "lines"
        fig.add_trace(go.Scatter(x=raw_x, y=raw_y, mode=mode, name=f"{name} raw", opacity=0.3,
                                   line=dict(width=1, color=color)))
        if smoothing > 0:
            sm_x, sm_y = stride(cols["step"], ema(cols["loss"], smoothing), max_points)
            fig.add_trace(go.Scatter(x=sm_x, y=sm_y, mode=mode, name=f"{name} EMA {smoothing:.2f}",
                                       line=dict(width=2, color=color)))
    fig.update_layout(title="Training loss per step", height=340, margin=dict(l=10, r=10, t=40, b=10),
                      hovermode="x unified", legend=dict(orientation="h", y=-0.2), xaxis_title="step",
                      yaxis_type="log" if log_y else "linear")
    return fig


def epoch_figures(runs: Mapping[str, Sequence[EpochRow]], log_y: bool, colors: dict[str, str] | None = None) -> tuple:
    """(loss, val accuracy) per epoch of each run, from the store's epoch rows."""
    losses, accuracy = {}, {}
    for name, rows in runs.items():
        x = [epoch_label(r["epoch"]) for r in rows]  # 1 = the first, as the table and the log count
        losses[f"{name} train"] = (x, [r["train_loss"] for r in rows], "solid")
        losses[f"{name} val"] = (x, [r["val_loss"] for r in rows], "dash")
        accuracy[f"{name} top-1"] = (x, [r["top1"] for r in rows], "solid")
        if any(r["top5"] is not None for r in rows):  # TensorFlow recipes record top-1 only
            accuracy[f"{name} top-5"] = (x, [r["top5"] for r in rows], "dot")
    loss_fig = curve_figure(losses, "Loss per epoch", log_y=log_y, colors=colors)
    acc_fig = curve_figure(accuracy, "Val accuracy per epoch (%)", colors=colors)
    for fig in (loss_fig, acc_fig):
        fig.update_xaxes(title="epoch")
        fig.update_layout(legend=dict(orientation="h", y=-0.35))  # below the axis title, not over it
    return loss_fig, acc_fig


def per_class_figure(names: Sequence[str], ids: Sequence[str], percent: Sequence[float], *, title: str,
                     color: str = "#1f5fbf", height: int = 300) -> go.Figure:
    """Top-1 per class as bars (0-100 %), named in the dataset's words with each class id in the tooltip."""
    fig = go.Figure(go.Bar(x=list(names), y=list(percent), customdata=list(ids), marker_color=color,
                           hovertemplate="%{x} (%{customdata}): %{y:.1f} %<extra></extra>"))
    fig.update_layout(title=title, height=height, yaxis_range=[0, 100], margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(showticklabels=len(names) <= MANY_CLASSES)
    return fig
