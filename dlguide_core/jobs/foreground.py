"""A job run in the foreground, by the process that asked for it (`train` without --detach, `jobs resume`
without --detach), and a machine joining a multi-node run (`train --node-rank K`).

The job is claimed running in this process (`claim_pid`, one transaction with its creation or resume), so no
dispatcher can take it meanwhile; it then runs here (jobs.runner) or, for N processes, under torchrun, whose
agent becomes the job's process. Ctrl-C reaches torchrun and its workers too (same terminal): they stop with a
checkpoint while this process waits. torch is imported only when a job runs here (`--help` stays light).
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import TYPE_CHECKING

from dlguide_core.jobs import queue
from dlguide_core.jobs.store import Job, JobStore
from dlguide_core.training.sinks import TrainingSink

if TYPE_CHECKING:
    from dlguide_core.training.recipes import RecipeConfig


def start(store: JobStore, recipe: str, config: RecipeConfig) -> Job:
    """A new job of `recipe`, created running in this process."""
    return queue.submit(store, recipe, config, start=False, claim_pid=os.getpid())


def resume(store: JobStore, job_id: str) -> Job:
    """A job resumed from its checkpoint, running in this process at once."""
    return store.prepare_resume(job_id, claim_pid=os.getpid())


def run(store: JobStore, job_id: str, sink: TrainingSink) -> str:
    """Run a job claimed by this process to its end, here or under torchrun; its final status."""
    from dlguide_core.jobs.runner import run_job

    command = queue.job_command(store.get(job_id, refresh=False))
    if command[2] == "torch.distributed.run":
        return _run_torchrun(store, job_id, command)
    return run_job(store, job_id, sink)


def join(command: list[str]) -> int:
    """Another machine's share of a multi-node run: torchrun `command` here (the job lives on node 0); its
    exit code."""
    return wait_ignoring_ctrl_c(subprocess.Popen(command))


def wait_ignoring_ctrl_c(proc: subprocess.Popen) -> int:
    """Wait for `proc` while Ctrl-C, which reaches it too, makes it stop with a checkpoint; its exit code."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_torchrun(store: JobStore, job_id: str, command: list[str]) -> str:
    proc = subprocess.Popen(command)
    store.set_pid(job_id, proc.pid)  # the job's process is torchrun's agent, as for a detached job
    code = wait_ignoring_ctrl_c(proc)
    job = store.get(job_id, refresh=False)
    if job.status == "running":  # the agent ended and no writer rank recorded an ending
        store.finish(job_id, "interrupted", f"torchrun exited with code {code} before the job finished")
    return store.get(job_id, refresh=False).status
