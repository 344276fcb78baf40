"""Train: one form around the data you have, then your jobs: their status, log and live curves.

Jobs run in their own processes (they survive closing the tab or restarting the app); this page only writes
requests to the job store and reads metrics from it, and reruns by itself only while a job is queued or running.
"""

import streamlit as st

from ui.booth import hide_in_booth
from ui.cache import app_job_store
from ui.finished_jobs import evaluate_section, export_section
from ui.jobs import jobs_panel
from ui.train_form import new_job_form

hide_in_booth()

st.title("Train")
st.caption("The guide's recipes as background jobs: Inception v3 fine-tuning on tiny-imagenet-200, the small CNN "
           "on CIFAR-10 and the TensorFlow case studies. Jobs keep running when you close this tab.")
store = app_job_store()

st.subheader("New job")
new_job_form(store)

st.subheader("Jobs")
jobs_panel(store)

all_jobs = store.list_jobs(refresh=False)
if all_jobs:
    with st.expander("Export metrics (CSV, TensorBoard)"):
        export_section(store, all_jobs)
    with st.expander("Evaluate a finished job"):
        evaluate_section(all_jobs)
