"""The Train page's live curves: which runs to compare (a choice that survives a visit to another page, and that
a newly started run joins), their per-step and per-epoch charts (one colour per run in every chart, "waiting
for the first step" before a run has reported), and a finished run's accuracy per class in the dataset's words."""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from dlguide_core.data.class_words import readable_names
from dlguide_core.jobs.catalog import is_training
from dlguide_core.jobs.job import display_label, display_name
from dlguide_core.jobs.store import ACTIVE, Job, JobStore
from dlguide_core.training.diagnostics import training_warnings
from dlguide_core.training.metrics import downsample, stride
from ui.charts import curve_figure, epoch_figures, per_class_figure, run_colors, training_loss_figure
from ui.literal_text import literal
from ui.runs import comparison_table

CHOICE = "train_view_choice"  # not a widget key: Streamlit drops a widget's state when its page is left


def join_comparison(job_id: str) -> None:
    """Add a run to the compared ones (a run just started joins those already shown)."""
    for key in (CHOICE, "train_view_jobs"):
        if key in st.session_state and job_id not in st.session_state[key]:
            st.session_state[key] = [*st.session_state[key], job_id]
    st.session_state.setdefault(CHOICE, [job_id])


def chip_labels(runs: list[Job]) -> dict[str, str]:
    """A run's chip: its name alone (issue 43: the id after it pushed the name out of the chip); the id after a
    name two runs share, so that each chip still names one run."""
    names = [display_name(j) for j in runs]
    return {j.id: name if names.count(name) == 1 else display_label(j) for j, name in zip(runs, names, strict=True)}


def view_controls(runs: list[Job]) -> list[str]:
    ids = [j.id for j in runs]
    if "train_view_jobs" in st.session_state:  # the widget's own state, this visit
        chosen = st.session_state["train_view_jobs"]
    else:  # first visit, or back from another page: what was chosen before, else the running, newest finished run
        chosen = st.session_state.get(CHOICE) or next(
            ([j.id for j in runs if j.status == status][:1] for status in ("running", "succeeded")
             if any(j.status == status for j in runs)), ids[:1])
    st.session_state["train_view_jobs"] = [i for i in chosen if i in ids]
    c1, c2, c3 = st.columns([4, 2, 1], vertical_alignment="bottom")
    labels = chip_labels(runs)
    picked = c1.multiselect("Runs to show (several overlay)", ids, key="train_view_jobs",
                            format_func=lambda i: labels.get(i, str(i)))
    c2.slider("Smoothing (EMA)", 0.0, 0.99, 0.6, 0.01, key="train_smoothing")
    c3.toggle("Log scale", key="train_log_y")
    st.session_state[CHOICE] = list(picked)
    return picked


def steps_of(store: JobStore, job: Job) -> dict[str, list]:
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


def per_class_chart(store: JobStore, job: Job, color: str) -> None:
    """A finished job's top-1 per class at its last epoch, in the dataset's words (the id in the tooltip)."""
    per_class = store.per_class_accuracy(job.id)
    if not per_class:
        return
    ids = list(per_class)
    data = job.config.get("data")
    names = readable_names(Path(data), tuple(ids)) if data else tuple(ids)
    fig = per_class_figure(names, ids, list(per_class.values()), color=color, height=280,
                           title=f"{display_label(job)}: accuracy per class at the last epoch (%)")
    st.plotly_chart(fig, key=f"train_per_class_{job.id}")


def _charts(store: JobStore, chosen: list[Job], colors: dict[str, str]) -> None:
    smoothing = st.session_state.get("train_smoothing", 0.6)
    log_y = st.session_state.get("train_log_y", False)
    label = {j.id: display_label(j) for j in chosen}  # legends name runs as people do, the id secondary
    steps = {j.id: steps_of(store, j) for j in chosen}
    for job in (j for j in chosen if not steps[j.id]["step"]):
        if job.status in ACTIVE:
            st.info(f"{literal(label[job.id])}: waiting for the first step ({job.status}).",
                    icon=":material/hourglass_top:")
        elif job.error or job.status == "failed":  # it broke before its first step: why, in one line (in full
            reason = (job.error or "no reason recorded (see its log)").strip().splitlines()[0]  # in its summary)
            st.error(f"{literal(label[job.id])} {job.status} before its first step: {reason}", icon=":material/error:")
        else:  # ended with no step stored (cancelled at once, or an older store's run): nothing is wrong
            st.info(f"{literal(label[job.id])} {job.status} with no step stored.", icon=":material/info:")
    runs = {label[i]: cols for i, cols in steps.items() if cols["step"]}
    epochs = {label[j.id]: store.epochs(j.id) for j in chosen}
    colors = {label[i]: c for i, c in colors.items() if i in label}
    for job in chosen:  # a diverged run says so, with what to change (no status change)
        name = label[job.id]
        for warning in training_warnings(runs.get(name, {}).get("loss", []), epochs[name], job.config):
            st.warning(f"{literal(name)}: {warning}", icon=":material/trending_up:")
    if not runs:
        return
    st.plotly_chart(training_loss_figure(runs, smoothing, log_y=log_y, colors=colors), key="train_loss_chart")
    left, right = st.columns(2)
    lr = {name: stride(c["step"], c["lr"]) for name, c in runs.items()}
    ips = {name: downsample(c["step"], c["images_per_s"]) for name, c in runs.items()}
    left.plotly_chart(curve_figure(lr, "Learning rate", log_y=log_y, colors=colors), key="train_lr_chart")
    right.plotly_chart(curve_figure(ips, "Images/s", colors=colors), key="train_ips_chart")
    accuracy = {name: stride(c["step"], c["accuracy"])
                for name, c in runs.items() if any(a is not None for a in c["accuracy"])}
    if accuracy:  # TensorFlow jobs: Keras reports a per-batch running mean over the epoch
        st.plotly_chart(curve_figure(accuracy, "Training accuracy per batch (%, running mean within each epoch)",
                                     colors=colors), key="train_step_acc_chart")
    if any(epochs.values()):
        loss_fig, acc_fig = epoch_figures({k: v for k, v in epochs.items() if v}, log_y, colors=colors)
        left.plotly_chart(loss_fig, key="train_epoch_loss_chart")
        right.plotly_chart(acc_fig, key="train_epoch_acc_chart")


def live_curves(store: JobStore, jobs: list[Job]) -> int:
    """The compared runs' curves; returns how many steps they hold (what a poll of them watches change)."""
    runs = [j for j in jobs if is_training(j.recipe)]  # evaluation jobs have no curves to overlay
    if not runs:
        return 0
    st.subheader("Live curves")
    picked = view_controls(runs)
    by_id = {j.id: j for j in runs}
    chosen = [by_id[i] for i in picked if i in by_id]
    if not chosen:
        st.caption("Pick one or more runs to see their curves.")
        return 0
    colors = run_colors([j.id for j in sorted(jobs, key=lambda j: j.created)])
    steps = sum(len(steps_of(store, j)["step"]) for j in chosen)
    st.caption(f"{steps:,} steps stored · refreshed {time.strftime('%H:%M:%S')} · "
               + " · ".join(f"{literal(display_label(j))}: {j.status}" for j in chosen))
    comparison_table(store, chosen, key="train_compare_table")
    _charts(store, chosen, colors)
    for job in chosen:
        if job.status not in ACTIVE:
            per_class_chart(store, job, colors[job.id])
    return steps
