"""Train: pick a recipe and a dataset, start a background job, watch its curves live.

Jobs run in their own processes (they survive closing the tab or restarting the
app); this page only writes requests to the job store and reads metrics from it.
"""

import time
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dlguide_core import settings
from dlguide_core.errors import DlguideError
from dlguide_core.jobs import queue
from dlguide_core.jobs.catalog import is_training
from dlguide_core.jobs.store import ACTIVE, RESUMABLE, Job
from dlguide_core.training.diagnostics import training_warnings
from dlguide_core.training.metrics import downsample, stride
from ui.cache import app_job_store
from ui.charts import curve_figure, epoch_figures, training_loss_figure
from ui.dataset_picker import pick_dataset
from ui.evaluation import evaluation_form
from ui.kiosk import hide_in_kiosk
from ui.runs import comparison_table
from ui.tensorflow import tf_train_section
from ui.train_form import job_form

hide_in_kiosk()

st.title("Train")
st.caption("The guide's recipes as background jobs: Inception v3 fine-tuning on tiny-imagenet-200 and the "
           "small CNN on CIFAR-10. Jobs keep running when you close this tab.")
store = app_job_store()


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return time.strftime("%H:%M:%S", time.gmtime(seconds)) if seconds < 86400 else f"{seconds / 86400:.1f} days"


@st.fragment(run_every=2)
def job_table() -> None:
    all_jobs = store.list_jobs()  # marks dead processes interrupted
    queue.dispatch(store)  # and starts queued jobs when a slot is free
    if not all_jobs:
        st.info("No jobs yet: start one above.")
        return
    rows = [store.summary(j) for j in all_jobs]
    st.dataframe(pd.DataFrame([{
        "job": r["id"], "recipe": r["recipe"], "status": r["status"], "epoch": r["epoch"],
        "progress": f"{r['step'] or 0}/{r['total_steps'] or '?'}",
        "images/s": None if r["images_per_s"] is None else round(r["images_per_s"], 1),
        "ETA": _eta(r["eta_s"]), "note": r["error"] or ""} for r in rows]), hide_index=True, key="train_jobs_table")
    job_actions(all_jobs)


def job_actions(all_jobs: list) -> None:
    by_id = {j.id: j for j in all_jobs}
    pick, cancel, resume, delete = st.columns([3, 1, 1, 1], vertical_alignment="bottom")
    job_id = pick.selectbox("Job", list(by_id), key="train_action_job",
                            format_func=lambda i: f"{i} · {by_id[i].recipe} · {by_id[i].status}")
    job = by_id[job_id]
    try:
        # Each action reruns the page so the table above shows the new status now, not at the next refresh.
        if cancel.button("Cancel", key="train_cancel", disabled=job.status not in ACTIVE):
            store.request_cancel(job_id)
            st.toast(f"Cancelling {job_id} at its next step")
            st.rerun()
        if resume.button("Resume", key="train_resume", disabled=job.status not in RESUMABLE):
            queue.resume(store, job_id)
            st.toast(f"Resumed {job_id}")
            st.rerun()
        if delete.button("Delete", key="train_delete", disabled=job.status in ACTIVE):
            store.delete(job_id)
            st.rerun()
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")


def steps_of(job: Job) -> dict[str, list]:
    """All per-step rows of a job, fetched incrementally (only new rows each refresh)."""
    cache = st.session_state.setdefault("train_steps_cache", {})
    key = f"{job.id}:{job.attempts}"  # a resume rewrites the steps after the checkpoint
    cols = cache.get(key)
    if cols is None or (cols["step"] and not store.has_step(job.id, cols["step"][-1], cols["time"][-1])):
        cols = cache[key] = store.steps(job.id)  # new, or a resumed run trimmed or redid what we hold
    else:
        new = store.steps(job.id, after=cols["step"][-1] if cols["step"] else 0)
        for name, values in new.items():
            cols[name].extend(values)
    return cols


@st.fragment(run_every=1)
def live_view(all_jobs: list) -> None:
    by_id = {j.id: j for j in store.list_jobs(refresh=False)} or {j.id: j for j in all_jobs}
    chosen = [by_id[i] for i in st.session_state.get("train_view_jobs", []) if i in by_id]
    if not chosen:
        return
    smoothing = st.session_state.get("train_smoothing", 0.6)
    log_y = st.session_state.get("train_log_y", False)
    runs = {j.id: steps_of(j) for j in chosen}
    shown = sum(len(c["step"]) for c in runs.values())
    st.caption(f"{shown:,} steps stored · refreshed {time.strftime('%H:%M:%S')} · "
               + " · ".join(f"{j.id}: {j.status}" for j in chosen))
    epochs = {j.id: store.epochs(j.id) for j in chosen}
    for job in chosen:  # a diverged run says so, with what to change (no status change)
        for warning in training_warnings(runs[job.id]["loss"], epochs[job.id], job.config):
            st.warning(f"{job.id}: {warning}", icon=":material/trending_up:")
        if job.skipped_files:  # unreadable files its dataset left out (corrupt, dangling links, bombs)
            st.warning(f"{job.id}: skipped {job.skipped_files['count']} unreadable file(s), e.g. "
                       f"{'; '.join(job.skipped_files['examples'][:2])}", icon=":material/broken_image:")
    comparison_table(store, chosen, key="train_compare_table")
    st.plotly_chart(training_loss_figure(runs, smoothing, log_y=log_y), key="train_loss_chart")
    left, right = st.columns(2)
    lr = {name: stride(c["step"], c["lr"]) for name, c in runs.items()}
    ips = {name: downsample(c["step"], c["images_per_s"]) for name, c in runs.items()}
    left.plotly_chart(curve_figure(lr, "Learning rate", log_y=log_y), key="train_lr_chart")
    right.plotly_chart(curve_figure(ips, "Images/s"), key="train_ips_chart")
    accuracy = {name: stride(c["step"], c["accuracy"])
                for name, c in runs.items() if any(a is not None for a in c["accuracy"])}
    if accuracy:  # TensorFlow jobs: Keras reports a per-batch running mean over the epoch
        st.plotly_chart(curve_figure(accuracy, "Training accuracy per batch (%, running mean within each epoch)"),
                        key="train_step_acc_chart")
    if any(epochs.values()):
        loss_fig, acc_fig = epoch_figures(epochs, log_y)
        left.plotly_chart(loss_fig, key="train_epoch_loss_chart")
        right.plotly_chart(acc_fig, key="train_epoch_acc_chart")
    for job in chosen:
        if job.status not in ACTIVE:
            per_class_chart(job)


def per_class_chart(job: Job) -> None:
    """A finished job's top-1 per class at its last epoch (the guide's closing per-class printout)."""
    per_class = store.per_class_accuracy(job.id)
    if not per_class:
        return
    fig = go.Figure(go.Bar(x=list(per_class), y=list(per_class.values()), marker_color="#1f5fbf",
                           hovertemplate="%{x}: %{y:.1f} %<extra></extra>"))
    fig.update_layout(title=f"{job.id}: accuracy per class at the last epoch (%)", height=280,
                      margin=dict(l=10, r=10, t=40, b=10), yaxis_range=[0, 100])
    st.plotly_chart(fig, key=f"train_per_class_{job.id}")


def view_controls(all_jobs: list) -> None:
    runs = [j for j in all_jobs if is_training(j.recipe)]  # evaluation jobs have no curves to overlay
    ids = [j.id for j in runs]
    default = [j.id for j in runs if j.status == "running"][:1] or ids[:1]
    c1, c2, c3 = st.columns([4, 2, 1], vertical_alignment="bottom")
    c1.multiselect("Runs to show (several overlay)", ids, default=default, key="train_view_jobs")
    c2.slider("Smoothing (EMA)", 0.0, 0.99, 0.6, 0.01, key="train_smoothing")
    c3.toggle("Log scale", key="train_log_y")


def export_section(all_jobs: list) -> None:
    job_id = st.selectbox("Export a job's metrics", [j.id for j in all_jobs], key="train_export_job")
    st.download_button("Download CSV", store.export_csv(job_id), file_name=f"{job_id}.csv", mime="text/csv",
                       key="train_export_csv")
    st.caption(f"Every job also writes TensorBoard event files: `tensorboard --logdir {settings.home() / 'jobs'}` "
               "(older jobs: `python -m dlguide_core jobs export ID --tensorboard DIR`).")


def evaluate_section(all_jobs: list) -> None:
    """A finished job's checkpoint on a held-out split (torchvision's --test-only), with its plots."""
    done = [j for j in all_jobs if j.status not in ACTIVE and j.checkpoint and Path(j.checkpoint).is_file()
            and j.framework == "pytorch"]
    if not done:
        st.info("No finished PyTorch job with a checkpoint yet.")
        return
    by_id = {j.id: j for j in done}
    job = by_id[st.selectbox("Job", list(by_id), key="train_eval_job",
                             format_func=lambda i: f"{i} · {by_id[i].recipe} · {by_id[i].status}")]
    evaluation_form(job.checkpoint, "train_eval", prefer_data=job.config.get("data"))


st.subheader("New job")
picked = pick_dataset()
if picked is not None:
    job_form(picked, store)
tf_train_section(store)  # the TensorFlow recipes: their own data (idx files, aclImdb) and form

st.subheader("Jobs")
job_table()
all_jobs = store.list_jobs(refresh=False)
if all_jobs:
    st.subheader("Live curves")
    view_controls(all_jobs)
    live_view(all_jobs)
    with st.expander("Export metrics (CSV, TensorBoard)"):
        export_section(all_jobs)
    with st.expander("Evaluate a finished job"):
        evaluate_section(all_jobs)
