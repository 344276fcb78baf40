"""The Train page's job panel: what happened to the job just started, the job table, the picked job (ui.job_view)
and, in a fragment of their own at a slower pace, the live curves (ui.live_curves): both poll only while a job can
change (ui.polling).

Starting a job never waits for its process: the form queues it and the core's `dispatch_in_background` launches it
on a worker thread, while the panel reports the job's real
status as the store has it: queued, running, or failed with its reason."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from dlguide_core.jobs import launch
from dlguide_core.jobs.background import dispatch_in_background
from dlguide_core.jobs.job import display_name, status_word
from dlguide_core.jobs.store import ACTIVE, Job, JobStore, JobSummary
from ui.cache import app_scheduler_watcher
from ui.durations import duration_text
from ui.executors import job_note, scheduler_banner, where
from ui.job_view import picked_job, select_job
from ui.literal_text import literal
from ui.live_curves import join_comparison, live_curves
from ui.polling import curves_interval, live_fragment
from ui.tables import with_dashes


def job_started(store: JobStore, job: Job) -> None:
    """A job the form just queued: remember it for the feedback line, show its curves, launch it."""
    st.session_state["train_started"] = job.id
    select_job(job.id)
    join_comparison(job.id)
    dispatch_in_background(store)


def eta_text(summary: JobSummary, validating: bool) -> str:
    if validating:
        return "validating"
    return duration_text(summary.eta_s)


def is_validating(job: Job, summary: JobSummary, epoch_rows: int) -> bool:
    """A running job between its epoch's last step and that epoch's row: it is scoring the val split."""
    step, epoch = summary.step, summary.epoch
    if job.status != "running" or not step or not job.total_steps or not job.epochs or epoch is None:
        return False
    if epoch_rows > epoch:  # this epoch's validation is already recorded
        return False
    if step >= job.total_steps:
        return True
    per_epoch, rest = divmod(job.total_steps, job.epochs)
    return not job.config.get("max_steps") and not rest and step % per_epoch == 0


def start_feedback(store: JobStore, by_id: dict[str, Job]) -> None:
    """The truth about the job this visitor started last, as the store has it now."""
    job = by_id.get(st.session_state.get("train_started", ""))
    if job is None:
        return
    batch = ""
    if job.framework == "pytorch" and "batch_size" in job.config:
        batch = ": " + launch.describe_batch(int(job.config["batch_size"]), job.launch.nproc_per_node,
                                             job.launch.nnodes)
    who = f"{literal(display_name(job))} (job {job.id})"  # the run's name first, the id secondary (issue 43)
    on = f" on {job.executor} as {job.external_id}" if job.external_id else ""  # handed to Slurm or Ray
    if job.status == "queued" and on:  # the scheduler starts it
        st.info(f"{who} queued{on}{batch}.", icon=":material/hourglass_top:")
    elif job.status == "queued":
        busy = sum(1 for j in by_id.values() if j.status == "running")
        st.info(f"{who} is queued{batch}. " + (f"It starts when a device is free ({busy} running)."
                if busy else "Starting its process…"), icon=":material/hourglass_top:")
    elif job.status == "running":
        st.success(f"{who} running{on}{batch}.", icon=":material/rocket_launch:")
    elif job.status == "failed":
        st.error(f"{who} failed: {job.error or 'no reason recorded (see its log below)'}",
                 icon=":material/error:")
    else:
        st.info(f"{who} {job.status}.", icon=":material/flag:")


MESSAGE_KEPT_S = 30.0  # a confirmation stays this long, through the panel's polls (issue 43: gone in 2-3 s)
MESSAGE_KEYS = ("train_notice", "train_refusal")


def kept_message(key: str) -> str | None:
    """The message an action left under `key` (a text), shown on every run of the panel for MESSAGE_KEPT_S, or
    until the next action leaves another; None after that."""
    fresh = st.session_state.pop(key, None)
    if fresh is not None:
        for other in MESSAGE_KEYS:  # the newest action's message replaces the one before (a refusal, a notice)
            st.session_state.pop(f"{other}_kept", None)
        st.session_state[f"{key}_kept"] = (str(fresh), time.monotonic() + MESSAGE_KEPT_S)
    text, until = st.session_state.get(f"{key}_kept", (None, 0.0))
    return text if time.monotonic() < until else None


def job_table(store: JobStore, jobs: list[Job]) -> dict[str, JobSummary]:
    """The table of every job; returns each job's summary row (store.summary) by id."""
    summaries = {j.id: store.summary(j) for j in jobs}
    rows = []
    for job in jobs:
        r = summaries[job.id]
        validating = is_validating(job, r, len(store.epochs(job.id))) if job.status == "running" else False
        note = job_note(job, r.error).split("\n")[0]  # a scheduler job's pending reason while it waits
        rows.append({"job": job.id, "name": job.name or "", "tags": ", ".join(job.tags), "recipe": job.recipe,
                     "status": status_word(job), "epoch": None if r.epoch is None else r.epoch + 1,
                     "progress": f"{r.step or 0}/{r.total_steps or '?'}",
                     "images/s": None if r.images_per_s is None else round(r.images_per_s, 1),
                     "ETA": eta_text(r, validating), "runs on": where(job),
                     "note": note if len(note) <= 70 else note[:69] + "… (in full below)"})
    frame = pd.DataFrame(rows)
    frame = frame.drop(columns=[c for c in ("name", "tags") if not frame[c].any()])
    if (frame["runs on"] == "this machine").all():
        frame = frame.drop(columns=["runs on"])
    st.dataframe(with_dashes(frame), hide_index=True, key="train_jobs_table",
                 column_config={"epoch": st.column_config.TextColumn("epoch", help="Epoch the last step was in "
                                                                     "(1 = the first)")})  # "—" before a step
    return summaries


def _panel(store: JobStore) -> tuple[bool, tuple]:
    jobs = store.list_jobs()  # marks dead processes interrupted
    for line in store.unreadable_jobs():  # a damaged row is named, and the others still listed
        st.warning(line, icon=":material/warning:")
    report, _ = app_scheduler_watcher().latest()  # Slurm/Ray, synced in the background (never waited on here)
    scheduler_banner(report)
    if any(j.status == "queued" for j in jobs):
        dispatch_in_background(store)  # the queue moves with no daemon: whoever looks starts what fits
    by_id = {j.id: j for j in jobs}
    start_feedback(store, by_id)
    if notice := kept_message("train_notice"):
        st.success(notice, icon=":material/check:")
    if refusal := kept_message("train_refusal"):
        st.error(refusal, icon=":material/block:")
    top = st.columns([6, 1], vertical_alignment="bottom")
    top[1].button("Refresh", key="train_refresh", icon=":material/refresh:",
                  help="Nothing runs, so the page stays still: refresh to see jobs started elsewhere (the CLI).")
    if not jobs:
        top[0].info("No jobs yet: start one above.")
        return False, ()
    summaries = job_table(store, jobs)
    log_size = picked_job(store, jobs, summaries)
    signature = (tuple((j.id, j.status, summaries[j.id].step) for j in jobs), log_size)
    return any(j.status in ACTIVE for j in jobs), signature


# Streamlit fades every element of a rerunning fragment ("stale") until it is redrawn: on a panel that
# refreshes every few seconds that is a flicker of the whole table and its buttons. The redraw replaces them in
# place, so they stay opaque meanwhile.
STEADY_CSS = ('<style>[data-testid="stMain"] [data-stale="true"] {opacity: 1 !important; transition: none !important;}'
              '</style>')


def jobs_panel(store: JobStore) -> None:
    """The job panel, rerunning by itself only while a job is queued or running, without flicker."""
    st.html(STEADY_CSS)
    active = any(j.status in ACTIVE for j in store.list_jobs())
    live_fragment("train_jobs", lambda: _panel(store), active)
    live_fragment("train_curves", lambda: _curves(store), active, fast=curves_interval())


def _curves(store: JobStore) -> tuple[bool, tuple]:
    """The live curves, a fragment of their own below the panel: redrawn at the curves' pace, not the table's."""
    jobs = store.list_jobs()
    steps = live_curves(store, jobs)
    return any(j.status in ACTIVE for j in jobs), (tuple((j.id, j.status) for j in jobs), steps)
