"""One job of the Train page's panel: its summary (how it ended, in full), the actions it allows (each disabled
with its reason when it cannot work), a confirmed Delete that names what is lost, and its log, tailed live
while it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import streamlit as st

from dlguide_core.errors import DlguideError
from dlguide_core.jobs.job import display_name, status_word
from dlguide_core.jobs.logs import job_log
from dlguide_core.jobs.store import ACTIVE, RESUMABLE, Job, JobStore, JobSummary
from ui.auth import act_on_job
from ui.executors import cancel as cancel_job
from ui.executors import job_files
from ui.executors import resume as resume_job
from ui.literal_text import literal

BadgeColor = Literal["red", "orange", "yellow", "blue", "green", "violet", "gray", "grey", "primary"]  # st.badge's
STATUS_COLOR: dict[str, BadgeColor] = {"queued": "gray", "running": "blue", "succeeded": "green", "failed": "red",
                                       "cancelled": "orange", "interrupted": "orange", "cancel requested": "orange"}
# The one source of truth for the job under the picker, the summary and the buttons (not a widget key: the
# picker's own value is its label, which changes with the job's status and would drop the selection to the
# first job). Absent: nothing picked yet (the newest job is shown); None: nothing on purpose (its job was deleted).
SELECTED = "train_selected_job"
PICKER = "train_action_job"


def select_job(job_id: str | None) -> None:
    """Put `job_id` under the picker, the summary and the buttons (None: no job, after a delete)."""
    st.session_state[SELECTED] = job_id


def _picked_by_user() -> None:
    """The picker's on_change: a job the user picked becomes the selection. A stale label the browser still holds
    (the job's status changed since it was drawn) is not a job id, and moves nothing."""
    value = st.session_state.get(PICKER)
    if value in st.session_state.get("train_picker_ids", ()):
        select_job(value)


def selected_job_id(ids: list[str]) -> str | None:
    """The selected job among `ids`, kept in SELECTED: the newest on a first visit (remembered, so a job started
    elsewhere later does not take its place); None once the selected job is gone (said once)."""
    if SELECTED not in st.session_state:
        select_job(ids[0] if ids else None)
    selected = st.session_state[SELECTED]
    if selected is not None and selected not in ids:  # deleted elsewhere (the CLI, another tab)
        st.info(f"The job you had picked, {selected}, is gone.", icon=":material/info:")
        select_job(selected := None)
    return selected


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


def cancel_block(job: Job) -> str:
    """Why Cancel cannot work for `job` ("" when it can)."""
    if job.status not in ACTIVE:
        return "Only a queued or running job can be cancelled."
    if job.cancel_requested:
        return ("Cancel requested: it stops at its next step, with a checkpoint (after the validation pass it is "
                "in, at most).")
    return ""


def _actions(store: JobStore, job: Job) -> None:
    cancel_why = cancel_block(job)
    resume_why = resume_block(job)
    delete_why = "Cancel it first: a queued or running job cannot be deleted." if job.status in ACTIVE else ""
    cancel, resume, delete = st.columns(3)
    try:
        if cancel.button("Cancel", key="train_cancel", disabled=bool(cancel_why), help=cancel_why or
                         "Stop at the next step, with a checkpoint (a queued job is dropped at once)."):
            act_on_job(job, "cancel", lambda: cancel_job(store, job))  # owner or admin (ui.auth); its executor
            st.session_state["train_notice"] = f"Cancelling {literal(display_name(job))} ({job.id}) at its next step."
            st.rerun()
        if resume.button("Resume", key="train_resume", disabled=bool(resume_why),
                         help=resume_why or "Queue it again; it continues from its last checkpoint."):
            act_on_job(job, "resume", lambda: resume_job(store, job))
            select_job(job.id)  # the page stays on the resumed job (same id), whatever the list does meanwhile
            st.session_state["train_notice"] = f"Resumed {literal(display_name(job))} ({job.id}): queued."
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
        st.warning(f"Delete “{literal(display_name(job))}” (job {job.id}, {job.recipe}, {job.status}) for good? "
                   "This removes "
                   f"{what_is_lost(job, summary)}. It cannot be undone.", icon=":material/delete_forever:")
        yes, no = st.columns(2)
        if yes.button("Delete for good", key="train_delete_confirm", type="primary"):
            del st.session_state["train_delete_pending"]
            try:
                act_on_job(job, "delete", lambda: store.delete(job.id))
                st.session_state["train_notice"] = f"Deleted “{literal(display_name(job))}” (job {job.id})."
                select_job(None)  # nothing is under the buttons until the user picks: never the next job's Delete
            except DlguideError as exc:  # e.g. not the owner (ui.auth): said as an error, after the rerun
                st.session_state["train_refusal"] = str(exc)
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
    word = status_word(job)
    st.badge(word, color=STATUS_COLOR.get(word, "gray"))
    st.text(f"{display_name(job)} · job {job.id}")  # which job this is, in the words of the picker
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


def picker_label(job: Job) -> str:
    """The picker's line for a job: its name, then its id. Nothing in it changes while the job runs (issue 43: its
    state, and an unnamed job's start time, changed in its first seconds; a new label re-selects the job, which
    closed the list under the visitor's click): the table and the summary say its state."""
    return f"{job.name or job.recipe} · {job.id}"  # the id holds when it was created


def picked_job(store: JobStore, jobs: list[Job], summaries: dict[str, JobSummary]) -> int:
    """The picker and the picked job's summary, actions and log; returns its log's size (the panel polls on it).
    Every part reads the selection (SELECTED), so all of them name one job whatever the list does meanwhile."""
    by_id = {j.id: j for j in jobs}
    ids = list(by_id)
    job_id = selected_job_id(ids)
    st.session_state["train_picker_ids"] = ids
    shown = picker_label(by_id[job_id]) if job_id else None
    if st.session_state.get("train_picker_shown", "") != shown or st.session_state.get(PICKER) != job_id:
        # The browser holds the picker's value as its label: once the label changes (a new status, a rename), that
        # value names no option and Streamlit would fall back to the first job. Told the selection again, it shows
        # the new label. Only then: a value set on every run would close the list while someone opens it.
        st.session_state[PICKER] = job_id
        st.session_state["train_picker_shown"] = shown
    st.selectbox("Job", ids, key=PICKER, on_change=_picked_by_user, placeholder="Pick a job",
                 format_func=lambda i: picker_label(by_id[i]) if i in by_id else str(i))
    if job_id is None:
        st.caption("Pick a job above to see its summary, its log and what you can do with it.")
        return 0
    job = by_id[job_id]
    _actions(store, job)
    job_files(job)  # a scheduler job's batch script and output, one click away
    _confirm_delete(store, job, summaries[job_id])
    summary_tab, log_tab = st.tabs(["Summary", "Log"])
    with summary_tab:
        with st.container(key="train_job_summary"):
            _summary(store, job, summaries[job_id])
    with log_tab:
        return _log_tab(job)
