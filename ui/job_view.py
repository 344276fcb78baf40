"""One job of the Train page's panel: its summary (how it ended, in full), the actions it allows (each disabled
with its reason when it cannot work), a confirmed Delete that names what is lost, and its log, tailed live
while it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import streamlit as st

from dlguide_core.errors import DlguideError
from dlguide_core.jobs.logs import job_log
from dlguide_core.jobs.store import ACTIVE, RESUMABLE, Job, JobStore, JobSummary
from ui.auth import act_on_job
from ui.executors import cancel as cancel_job
from ui.executors import job_files
from ui.executors import resume as resume_job

BadgeColor = Literal["red", "orange", "yellow", "blue", "green", "violet", "gray", "grey", "primary"]  # st.badge's
STATUS_COLOR: dict[str, BadgeColor] = {"queued": "gray", "running": "blue", "succeeded": "green", "failed": "red",
                                       "cancelled": "orange", "interrupted": "orange"}


def stop_note(job: Job, summary: JobSummary) -> str:
    """How the run ended against its limits: "stopped at max steps 20, in epoch 1 of 2" when Max steps won."""
    max_steps, epochs, step = job.config.get("max_steps"), job.config.get("epochs"), summary.step
    if job.status in ACTIVE or not max_steps or not step or step < max_steps or summary.epoch is None:
        return ""
    if epochs and summary.epoch + 1 < epochs:
        return f"stopped at max steps {max_steps}, in epoch {summary.epoch + 1} of {epochs}"
    return f"stopped at max steps {max_steps}, in its last epoch ({epochs})"


def resume_block(job: Job) -> str:
    """Why Resume cannot work for `job` ("" when it can)."""
    if job.status not in RESUMABLE:
        return f"A {job.status} job cannot be resumed."
    if job.checkpoint_file is None:
        return (f"No checkpoint was saved before it {'stopped' if job.status != 'failed' else 'failed'}: "
                "there is nothing to resume from. Fix the cause and start a new job.")
    return ""


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def what_is_lost(job: Job, summary: JobSummary) -> str:
    parts = []
    if (checkpoint := job.checkpoint_file) is not None:
        parts.append(f"its checkpoint {job.checkpoint} ({checkpoint.stat().st_size / 1e6:.1f} MB)")
    parts.append(f"its folder {job.job_dir} ({_size(job.job_dir) / 1e6:.1f} MB: log, TensorBoard files)")
    parts.append(f"its metrics ({summary.step or 0} steps)")
    return "; ".join(parts)


def _actions(store: JobStore, job: Job) -> None:
    cancel_why = "" if job.status in ACTIVE else "Only a queued or running job can be cancelled."
    resume_why = resume_block(job)
    delete_why = "Cancel it first: a queued or running job cannot be deleted." if job.status in ACTIVE else ""
    cancel, resume, delete = st.columns(3)
    try:
        if cancel.button("Cancel", key="train_cancel", disabled=bool(cancel_why), help=cancel_why or
                         "Stop at the next step, with a checkpoint (a queued job is dropped at once)."):
            act_on_job(job, "cancel", lambda: cancel_job(store, job))  # owner or admin (ui.auth); its executor
            st.session_state["train_notice"] = f"Cancelling {job.id} at its next step."
            st.rerun()
        if resume.button("Resume", key="train_resume", disabled=bool(resume_why),
                         help=resume_why or "Queue it again; it continues from its last checkpoint."):
            act_on_job(job, "resume", lambda: resume_job(store, job))
            st.session_state["train_notice"] = f"Resumed {job.id}: queued."
            st.rerun()
        if delete.button("Delete…", key="train_delete", disabled=bool(delete_why),
                         help=delete_why or "Asks first, naming what is lost."):
            st.session_state["train_delete_pending"] = job.id
    except DlguideError as exc:
        st.error(str(exc), icon=":material/block:")
    if resume_why and job.status in RESUMABLE:  # shown, not only in a tooltip: phones have no hover
        st.caption(f"Resume is off: {resume_why}")


def _confirm_delete(store: JobStore, job: Job, summary: JobSummary) -> None:
    if st.session_state.get("train_delete_pending") != job.id:
        return
    with st.container(border=True, key="train_delete_box"):
        st.warning(f"Delete job {job.id} ({job.recipe}, {job.status}) for good? This removes "
                   f"{what_is_lost(job, summary)}. It cannot be undone.", icon=":material/delete_forever:")
        yes, no = st.columns(2)
        if yes.button("Delete for good", key="train_delete_confirm", type="primary"):
            del st.session_state["train_delete_pending"]
            try:
                act_on_job(job, "delete", lambda: store.delete(job.id))
                st.session_state["train_notice"] = f"Deleted job {job.id}."
            except DlguideError as exc:  # e.g. not the owner (ui.auth): said as an error, after the rerun
                st.session_state["train_refusal"] = str(exc)
            st.session_state.pop("train_action_job", None)  # the picker does not jump onto the next job's Delete
            st.rerun()
        if no.button("Keep it", key="train_delete_keep"):
            del st.session_state["train_delete_pending"]
            st.rerun()


def _name_editor(store: JobStore, job: Job) -> None:
    """The run's name and tags, editable (W&B-style); saved to the store."""
    left, right, save = st.columns([3, 3, 1], vertical_alignment="bottom")
    name = left.text_input("Name", job.name or "", key=f"train_name_{job.id}", max_chars=120)
    tags = right.text_input("Tags (comma-separated)", ", ".join(job.tags), key=f"train_tags_{job.id}",
                            max_chars=200)
    if save.button("Save", key=f"train_rename_{job.id}"):
        new_tags = list(dict.fromkeys(t.strip() for t in tags.split(",") if t.strip()))
        try:  # the owner's (or an admin's) action, audited like delete (ui.auth)
            act_on_job(job, "rename", lambda: store.rename(job.id, name.strip() or None, new_tags))
            st.session_state["train_notice"] = f"Saved the name and tags of {job.id}."
        except DlguideError as exc:
            st.session_state["train_refusal"] = str(exc)
        st.rerun()


def _summary(store: JobStore, job: Job, summary: JobSummary) -> None:
    st.badge(job.status, color=STATUS_COLOR.get(job.status, "gray"))
    _name_editor(store, job)
    if job.status == "failed":
        st.error(job.error or "No reason was recorded: the log tab has the process's output.",
                 icon=":material/error:")
    elif job.error:
        st.info(job.error, icon=":material/info:")
    if job.skipped_files:  # unreadable files its dataset left out (corrupt, dangling links, bombs)
        st.warning(f"Skipped {job.skipped_files['count']} unreadable file(s), e.g. "
                   f"{'; '.join(job.skipped_files['examples'][:2])}", icon=":material/broken_image:")
    if note := stop_note(job, summary):
        st.caption(note.capitalize() + ".")
    if job.checkpoint_file is not None:
        st.caption(f"Checkpoint: `{job.checkpoint}` (step {job.checkpoint_step})")


def _log_tab(job: Job) -> int:
    log = job_log(job)
    if log.empty:
        st.caption("No log yet: the job's process has not written anything.")
    else:
        st.code(log.text, language="text", height=320, wrap_lines=True)
        shown = "the last part" if log.truncated else "all of it"
        st.caption(f"`{log.source}`: {log.size:,} bytes, {shown} shown"
                   + (", updated live while it runs." if job.status in ACTIVE else "."))
    return log.size


def picked_job(store: JobStore, jobs: list[Job], summaries: dict[str, JobSummary]) -> int:
    """The picker and the picked job's summary, actions and log; returns its log's size (the panel polls on it)."""
    by_id = {j.id: j for j in jobs}
    if st.session_state.get("train_action_job") not in by_id:
        st.session_state.pop("train_action_job", None)
    job_id = st.selectbox("Job", list(by_id), key="train_action_job",
                          format_func=lambda i: f"{i} · {by_id[i].name or by_id[i].recipe} · {by_id[i].status}")
    job = by_id[job_id]
    _actions(store, job)
    job_files(job)  # a scheduler job's batch script and output, one click away
    _confirm_delete(store, job, summaries[job_id])
    summary_tab, log_tab = st.tabs(["Summary", "Log"])
    with summary_tab:
        _summary(store, job, summaries[job_id])
    with log_tab:
        return _log_tab(job)
