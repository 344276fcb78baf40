"""A pid is judged only where it was taken: on its host, since its boot, in its PID namespace (issue 20).

Before, a reader in another PID namespace (a second container on the same volume) could not see a live
job's process, marked the job `interrupted`, and a resume then ran it twice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from dlguide_core.jobs import liveness
from dlguide_core.jobs.store import JobStore
from tests.support.paths import ROOT


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_set_pid_records_host_and_boot_id_with_the_pid() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    store.claim(job.id, os.getpid())
    job = store.get(job.id)
    assert (job.host, job.boot_id) == liveness.process_identity()
    assert open("/proc/sys/kernel/random/boot_id").read().strip() in job.boot_id


def test_a_job_on_another_host_is_not_judged_by_a_pid_here() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    store.claim(job.id, _dead_pid())
    store.set_host(job.id, "node17.cluster", "another-boot pid:[1]")
    assert store.refresh() == [] and store.get(job.id).status == "running"


def test_a_dead_pid_on_this_host_still_interrupts_the_job() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    store.claim(job.id, _dead_pid())
    assert store.refresh() == [job.id] and store.get(job.id).status == "interrupted"


def test_a_scheduler_job_before_its_process_says_where_it_runs_is_left_to_the_scheduler() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, executor="slurm")
    store.claim(job.id, _dead_pid())
    store.set_host(job.id, None, None)  # claimed on a node that has not recorded its host yet
    assert store.refresh() == [] and store.get(job.id).status == "running"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
def test_a_reader_in_another_pid_namespace_leaves_a_live_job_running() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        store.claim(job.id, sleeper.pid)
        reader = ("from dlguide_core.jobs.store import JobStore; s = JobStore(); "
                  f"print(s.refresh(), s.get({job.id!r}, refresh=False).status)")
        done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", reader],
                              cwd=ROOT, capture_output=True, text=True, timeout=60, env=os.environ.copy())
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["[]", "running"]
        assert store.get(job.id).status == "running"
    finally:
        sleeper.kill()
        sleeper.wait()
