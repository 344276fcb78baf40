"""What a dlguide job on Ray is given: its entrypoint, its runtime environment (variables only), its resources.

No working_dir in the runtime environment: Ray would upload the checkout, `.venv` included. The code is
found through PYTHONPATH (the checkout's path, the same on every node: a shared file system).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dlguide_core import settings
from dlguide_core.jobs.job import LaunchFields
from dlguide_core.jobs.store_url import UrlError, split_url

PYTHON_ENV = "DLGUIDE_RAY_PYTHON"  # the Python on the Ray nodes (default: this one, for a head on this machine)
STOP_GRACE_S = 60  # Ray's stop_job: SIGINT, then SIGKILL after this (Ray's default, 3 s, cuts a checkpoint)
ENTRY_MODULE = "dlguide_core.jobs.executors.ray_entry"
# What travels with the job (Ray keeps a job's runtime environment in its record: its dashboard and `ray job list`
# show it to anyone who can reach the head, so no secret goes there: a store URL with a password stays home).
FORWARDED = ("DLGUIDE_DATA_ROOTS", "DLGUIDE_OFFLINE", "DLGUIDE_MAX_JOBS", "TORCH_HOME")
STORE_URL_ENV = "DLGUIDE_STORE_URL"
CHECKOUT = Path(__file__).resolve().parents[3]


def store_secrets(url: str) -> bool:
    """True when a store URL holds a secret (a password, a `password=` parameter) or cannot be read: it stays home."""
    try:
        return bool(split_url(url).secrets)
    except UrlError:
        return url.startswith("postgres")


def entrypoint(job_id: str, python: str | None = None) -> str:
    """The shell command Ray runs: the job's entry (jobs.executors.ray_entry: claim, then the runner or torchrun)."""
    python = python or os.environ.get(PYTHON_ENV) or sys.executable
    return shlex.join([python, "-m", ENTRY_MODULE, job_id])


def runtime_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """env_vars only: the checkout on PYTHONPATH, DLGUIDE_HOME, a few of our settings, the store URL when it holds
    no password (else the nodes' own DLGUIDE_STORE_URL, set where `ray start` runs), and a stop that can checkpoint."""
    env = {k: environ[k] for k in FORWARDED if k in environ}
    url = environ.get(STORE_URL_ENV, "").strip()
    if url and not store_secrets(url):
        env[STORE_URL_ENV] = url
    env.update({"DLGUIDE_HOME": str(settings.home()), "PYTHONPATH": str(CHECKOUT), "PYTHONUNBUFFERED": "1",
                # Read by Ray's job supervisor (it runs with these variables): SIGINT is dlguide's "cancel".
                "RAY_JOB_STOP_SIGNAL": "SIGINT", "RAY_JOB_STOP_WAIT_TIME_S": str(STOP_GRACE_S)})
    return {"env_vars": env}


def resources(launch: LaunchFields, gpus_on_cluster: bool | None = None) -> dict[str, float]:
    """Ray's entrypoint resources for a job: one GPU per process, or one CPU per process for a CPU job.

    `device` "cpu" asks for CPUs; "cuda" for GPUs; "auto" for GPUs when the cluster has any (`gpus_on_cluster`)."""
    processes = max(launch.nproc_per_node, 1)
    device = launch.device_kind
    wants_gpu = device == "cuda" or (device == "auto" and bool(gpus_on_cluster))
    if wants_gpu:
        return {"entrypoint_num_gpus": float(processes), "entrypoint_num_cpus": 0.0}
    return {"entrypoint_num_cpus": float(processes)}
