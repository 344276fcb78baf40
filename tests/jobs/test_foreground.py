"""jobs.foreground: a job run by the process that asked for it (`train`, `jobs resume` without --detach)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from dlguide_core.jobs import foreground
from dlguide_core.jobs.store import JobStore


def test_ctrl_c_while_waiting_reaches_the_child_not_this_process() -> None:
    before = signal.getsignal(signal.SIGINT)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0); raise SystemExit(4)"])
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()  # Ctrl-C in the terminal, for us
    assert foreground.wait_ignoring_ctrl_c(child) == 4  # waited to the end: no KeyboardInterrupt here
    assert signal.getsignal(signal.SIGINT) is before  # and Ctrl-C means Ctrl-C again afterwards


@pytest.mark.usefixtures("store_url")
def test_a_torchrun_agent_that_ends_before_the_job_leaves_it_interrupted_with_its_exit_code() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {"epochs": 1, "nproc_per_node": 2}, claim_pid=os.getpid())
    assert job.status == "running" and job.pid == os.getpid()
    status = foreground._run_torchrun(store, job.id, [sys.executable, "-c", "raise SystemExit(3)"])
    job = store.get(job.id, refresh=False)
    assert status == job.status == "interrupted" and job.pid != os.getpid()  # the agent was the job's process
    assert job.error == "torchrun exited with code 3 before the job finished"
