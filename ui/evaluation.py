"""Evaluation widgets shared by Train (a finished job) and Classify (any checkpoint).

Streamlit glue only: the loop and the metrics live in dlguide_core.evaluation;
the figures are built from the result's JSON (the `evaluate --json` contract), so what the page
draws is exactly what the CLI prints and the download holds. A long evaluation (evaluation_job.is_long)
runs as a job of the store, polled in a fragment; its stored JSON is found again after a reload.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from dlguide_core import settings
from dlguide_core.data import image_folders
from dlguide_core.errors import DlguideError
from dlguide_core.jobs import queue
from dlguide_core.jobs.evaluation_job import (
    EVALUATE_RECIPE,
    EvaluateConfig,
    inline_max,
    is_long,
    latest_job,
    stored_result,
)
from dlguide_core.jobs.store import ACTIVE, JobStore

if TYPE_CHECKING:  # dlguide_core.evaluation imports torch: loaded when an evaluation runs
    from streamlit.delta_generator import DeltaGenerator

    from dlguide_core.evaluation import EvaluationJson, MistakeJson
from dlguide_core.vision.result_files import confusion_csv, evaluation_json
from ui import charts
from ui.auth import act_on_job, current_user
from ui.cache import app_job_store, existing_job_store, get_model
from ui.slots import TimerSlot, timer_slot


def _unique(labels: list[str], classes: list[str]) -> list[str]:
    # Plotly merges equal category names: two classes called "tabby" would become one row.
    counts = Counter(labels)
    return [label if counts[label] == 1 else f"{label} ({cls})" for label, cls in zip(labels, classes)]


def sorted_classes(result: EvaluationJson) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(order worst class first, readable names, row-normalised percent matrix)."""
    conf = result["confusion"]
    matrix = np.asarray(conf["matrix"], dtype=np.float64)  # (C, C) counts
    totals = matrix.sum(axis=1, keepdims=True)
    percent = np.divide(100.0 * matrix, totals, out=np.full_like(matrix, np.nan), where=totals > 0)
    accuracy = np.diag(percent)
    order = np.argsort(np.nan_to_num(accuracy, nan=101.0), kind="stable")  # classes without images last
    return order, _unique(list(conf["labels"]), list(conf["classes"])), percent


def confusion_figure(result: EvaluationJson) -> go.Figure:
    """Heatmap, rows and columns in the same order (worst class first) so the diagonal stays one."""
    order, names, percent = sorted_classes(result)
    counts = np.asarray(result["confusion"]["matrix"])[np.ix_(order, order)]
    shown = [names[i] for i in order]
    ids = [str(result["confusion"]["classes"][i]) for i in order]
    # (C, C, 3): the count, then the true and predicted class ids (a class's id goes in the tooltip)
    cells = [[[int(counts[r][c]), ids[r], ids[c]] for c in range(len(ids))] for r in range(len(ids))]
    fig = go.Figure(go.Heatmap(
        z=percent[np.ix_(order, order)], x=shown, y=shown, customdata=cells, colorscale="Blues", zmin=0, zmax=100,
        hovertemplate="true: %{y} (%{customdata[1]})<br>predicted: %{x} (%{customdata[2]})<br>"
                      "%{customdata[0]} images (%{z:.1f} % of the class)<extra></extra>",
        colorbar=dict(title="% of true")))
    many = len(shown) > charts.MANY_CLASSES
    fig.update_layout(title="Confusion matrix (rows: true class, worst first; % of each true class)",
                      height=min(900, 320 + (4 if many else 22) * len(shown)), margin=dict(l=10, r=10, t=50, b=10))
    fig.update_xaxes(title="predicted", showticklabels=not many, tickangle=-45)
    fig.update_yaxes(title="true", showticklabels=not many, autorange="reversed")
    return fig


def per_class_figure(result: EvaluationJson) -> go.Figure:
    order, names, percent = sorted_classes(result)
    accuracy = np.diag(percent)
    keep = [i for i in order if not np.isnan(accuracy[i])]
    return charts.per_class_figure([names[i] for i in keep], [str(result["confusion"]["classes"][i]) for i in keep],
                                   [float(accuracy[i]) for i in keep], title="Top-1 per class (%, worst first)")


def show_evaluation(result: EvaluationJson, key: str) -> None:
    """Numbers, the restricted-label note, heatmap + top confusions, per-class bars, mistakes, downloads."""
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Top-1", f"{result['top1']:.2f} %")
    c2.metric("Top-5", f"{result['top5']:.2f} %")
    c3.metric("Mean loss", f"{result['loss']:.4f}")
    c4.metric("Images/s", f"{result['images_per_s']:.1f}", help=f"{result['images']} images")
    st.caption(f"{result['weights']} on `{result['data']}` / {result['split']}: {result['images']} images")
    if note := result.get("note"):
        st.info(note.capitalize(), icon=":material/filter_alt:")
    heat, top = st.columns([3, 1])
    heat.plotly_chart(confusion_figure(result), key=f"{key}_confusion")
    top.markdown("**Top confusions**")
    top.dataframe([{"true": r["true"], "predicted as": r["predicted"], "images": r["count"], "%": r["percent"]}
                   for r in result["top_confusions"]], hide_index=True, key=f"{key}_top_confusions")
    st.plotly_chart(per_class_figure(result), key=f"{key}_per_class")
    mistakes_grid(result["mistakes"])
    left, right = st.columns(2)
    left.download_button("Download evaluation (JSON)", evaluation_json(result), file_name="evaluation.json",
                         mime="application/json", key=f"{key}_download_json")
    right.download_button("Download confusion matrix (CSV)", confusion_csv(result["confusion"]),
                          file_name="confusion_matrix.csv", mime="text/csv", key=f"{key}_download_csv")


def mistakes_grid(mistakes: list[MistakeJson], columns: int = 4) -> None:
    if not mistakes:
        return
    st.markdown("**Most confident mistakes**")
    cells = st.columns(columns)
    for i, m in enumerate(mistakes):
        cells[i % columns].image(m["image"], width=128,
                                 caption=f"true: {m['true']} · predicted: {m['predicted']} ({100 * m['prob']:.1f} %)")


def _splits(info: image_folders.DatasetInfo) -> list[str]:
    return [s for s in ("val", "test", "train") if (info.path / s).is_dir()]


def evaluation_form(weights: str, key: str, prefer_data: str | None = None,
                    progress: TimerSlot | None = None) -> None:
    """Pick a dataset of the data roots, a split and a size, evaluate `weights` on it, show the result.

    `progress`: where a running evaluation job's progress goes (a timer redraws it): a slot the page made at a
    fixed place (ui.slots), or by default one made here, below the form. Every part sits in a slot made first,
    so whatever a click adds (a bar, an error) never moves the progress."""
    controls, feedback = st.container(), st.container()
    progress = progress or timer_slot(f"{key}_progress")
    shown = st.container()
    with controls:
        found = [d for d in image_folders.find_datasets(settings.data_roots()) if d.kind == "imagefolder"]
        if not found:
            st.info("No class-folder dataset (split/<class>/images) in the data roots to evaluate on.")
            return
        paths = [str(d.path.resolve()) for d in found]
        preferred = str(Path(prefer_data).resolve()) if prefer_data else None
        c1, c2, c3 = st.columns([3, 1, 1])
        info = c1.selectbox("Evaluate on", found, index=paths.index(preferred) if preferred in paths else 0,
                            format_func=lambda d: f"{d.path.name} ({len(d.classes)} classes)", key=f"{key}_data")
        split = c2.selectbox("Split", _splits(info) or ["val"], key=f"{key}_split")
        limit = c3.number_input("Images (0 = all)", 0, 1_000_000, 0, step=100, key=f"{key}_limit")
        run = st.button("Evaluate", key=f"{key}_run", type="primary")
    if run:
        st.session_state.pop(f"{key}_result", None)
        st.session_state.pop(f"{key}_evaluation_job", None)
        with feedback:
            if is_long(info.path, split, limit or None):
                _submit(weights, info.path, split, limit or None, key)
            else:
                _evaluate_inline(weights, info.path, split, limit or None, key)
    source, result = st.session_state.get(f"{key}_result") or (None, None)
    if result is not None and source == weights:  # another model picked since: its result is not this one's
        with shown:
            show_evaluation(result, key)
        return
    source, job_id = st.session_state.get(f"{key}_evaluation_job") or (None, None)
    if source != weights:  # a new session (reload, another tab): the newest job of these weights, if any
        store = existing_job_store()
        job = latest_job(store, weights) if store else None
        job_id = job.id if job else None
    if job_id:
        show_job(job_id, key, progress, shown)


def _store() -> JobStore:
    return app_job_store()


def _evaluate_inline(weights: str, data: Path, split: str, limit: int | None, key: str) -> None:
    bar = st.progress(0.0, text="Evaluating…")
    try:
        from dlguide_core.evaluation import evaluate_model

        result = evaluate_model(get_model(weights), data, split=split, limit=limit,
                                progress=lambda done, total: bar.progress(done / total,
                                                                          text=f"Evaluating {done}/{total}"))
        st.session_state[f"{key}_result"] = (weights, result.to_json())
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")
    bar.empty()


def _submit(weights: str, data: Path, split: str, limit: int | None, key: str) -> None:
    """More than inline_max() images: a background job (it survives the tab), watched by show_job."""
    try:
        cfg = EvaluateConfig(weights=weights, data=str(data.resolve()), split=split, limit=limit)
        job = queue.submit(_store(), EVALUATE_RECIPE, cfg, owner=current_user())
        st.session_state[f"{key}_evaluation_job"] = (weights, job.id)
        st.toast(f"More than {inline_max()} images: evaluating as job {job.id}")
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")


def show_job(job_id: str, key: str, progress: TimerSlot, shown: DeltaGenerator) -> None:
    """An evaluation job: its progress while it runs (in `progress`), then the same views from its stored JSON."""
    try:
        job = _store().get(job_id)
    except DlguideError:  # deleted since
        return
    if job.status in ACTIVE:
        progress.claim(job_id)
        with progress.container:
            job_progress(job_id, key, progress)
        return
    with shown:
        if (result := stored_result(job_id)) is not None:
            st.caption(f"Evaluation job {job_id} ({job.status}).")
            show_evaluation(result, key)
        else:
            st.warning(f"Evaluation job {job_id} {job.status}" + (f": {job.error}" if job.error else "."),
                       icon=":material/block:")


@st.fragment(run_every=1)
def job_progress(job_id: str, key: str, slot: TimerSlot) -> None:
    if not slot.holds(job_id):  # a late tick after a run that shows something else (other weights): nothing
        return
    store = _store()
    try:
        job = store.get(job_id)  # marks a dead process interrupted
    except DlguideError:  # deleted meanwhile (Train's job table)
        st.rerun()
    if job.status not in ACTIVE:
        st.rerun()  # the whole page: show_job now draws the result
    if job.status == "queued":
        queue.dispatch(store)  # nothing else may be polling the queue (Classify)
        st.info(f"Evaluation job {job_id} queued: it starts when a running job frees its device.")
        return
    row = store.summary(job)
    done, total = row.step or 0, row.total_steps
    speed = f" · {row.images_per_s:.1f} images/s" if row.images_per_s else ""
    st.progress(done / total if total else 0.0, text=f"Evaluation job {job_id}: {done}/{total or '?'} images"
                + speed + (f" · about {row.eta_s:.0f} s left" if row.eta_s is not None else ""))
    if st.button("Cancel evaluation", key=f"{key}_cancel_job"):
        try:
            act_on_job(job, "cancel", lambda: store.request_cancel(job_id))  # owner or admin (ui.auth)
        except DlguideError as exc:
            st.error(str(exc), icon=":material/block:")
