"""jobs.running_here: the jobs a benchmark reports as having run beside it (issue 31), never creating a store."""

import os

from dlguide_core.jobs.running_here import running_jobs_here
from dlguide_core.jobs.store import open_store
from dlguide_core.jobs.store_url import store_url


def test_no_store_means_no_jobs_and_none_is_created(isolated_home):
    assert running_jobs_here() == frozenset()
    assert not store_url().path.exists()


def test_a_job_running_in_a_process_here_is_found(isolated_home):
    store = open_store()
    job = store.create("cifar_net", "pytorch", {"epochs": 1}, claim_pid=os.getpid())  # running in this process
    store.create("cifar_net", "pytorch", {"epochs": 1})  # queued: not running
    assert running_jobs_here() == frozenset({job.id})
