"""What a finished job gives on the Train page: its metrics as CSV (and where its TensorBoard files are), and
its checkpoint scored on a held-out split (torchvision's --test-only), newest job first."""

from __future__ import annotations

import streamlit as st

from dlguide_core import settings
from dlguide_core.jobs.store import ACTIVE, Job, JobStore
from ui.evaluation import evaluation_form
from ui.job_view import picker_label


def export_section(store: JobStore, all_jobs: list[Job]) -> None:
    labels = {j.id: picker_label(j) for j in all_jobs}  # every job picker of the page in one format
    job_id = st.selectbox("Export a job's metrics", list(labels), key="train_export_job",
                          format_func=lambda i: labels.get(i, i))
    st.download_button("Download CSV", store.export_csv(job_id), file_name=f"{job_id}.csv", mime="text/csv",
                       key="train_export_csv")
    st.caption(f"Every job also writes TensorBoard event files: `tensorboard --logdir {settings.home() / 'jobs'}` "
               "(older jobs: `python -m dlguide_core jobs export ID --tensorboard DIR`).")


def evaluable_jobs(all_jobs: list[Job]) -> list[Job]:
    """Finished PyTorch jobs with a checkpoint on disk, the newest first."""
    done = [j for j in all_jobs if j.status not in ACTIVE and j.checkpoint_file is not None
            and j.framework == "pytorch"]
    return sorted(done, key=lambda j: j.finished or j.created, reverse=True)


def evaluate_section(all_jobs: list[Job]) -> None:
    """A finished job's checkpoint on a held-out split, with its plots (the newest job is the default)."""
    done = evaluable_jobs(all_jobs)
    if not done:
        st.info("No finished PyTorch job with a checkpoint yet.")
        return
    by_id = {j.id: j for j in done}
    if st.session_state.get("train_eval_job") not in by_id:
        st.session_state.pop("train_eval_job", None)
    job = by_id[st.selectbox("Job to evaluate", list(by_id), key="train_eval_job",  # not a second "Job"
                             format_func=lambda i: picker_label(by_id[i]))]
    if (checkpoint := job.checkpoint_file) is None:  # deleted since the list was made
        st.info(f"The checkpoint of {job.id} is gone.")
        return
    evaluation_form(str(checkpoint), "train_eval", prefer_data=job.config.get("data"))
