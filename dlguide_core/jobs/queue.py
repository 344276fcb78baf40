"""The job queue: submit, dispatch onto free devices, launch each job's own process, resume.

A job counts as the devices it uses (store.devices_of); the queue starts queued jobs, oldest first,
while they fit in `max_concurrent()` devices (JobStore.claim_next), each in its own detached
process (`jobs.runner`, or torchrun over `jobs.worker` for a distributed job: jobs.launch), pinned
to its block of GPUs. Whoever frees a slot (a job process ending, `jobs list`, the Train page)
dispatches again, so the queue moves with no daemon.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from dlguide_core import settings
from dlguide_core.errors import DlguideError
from dlguide_core.jobs.launch import launch_spec_from_config, torchrun_command  # torch-free, as `jobs list` needs
from dlguide_core.jobs.store import Job, JobError, JobStore, devices_of, job_dir, log_path
from dlguide_core.jobs.store_url import absolute_environment

if TYPE_CHECKING:
    from dlguide_core.training.recipes import RecipeConfig


def max_jobs_setting() -> int | None:
    """DLGUIDE_MAX_JOBS when it is a positive integer, else None."""
    raw = os.environ.get("DLGUIDE_MAX_JOBS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def max_concurrent() -> int:
    """Devices the queue may fill at once (see claim_next: a job counts as its devices):
    DLGUIDE_MAX_JOBS, else the GPUs PyTorch sees, 1 on a CPU-only machine."""
    if (setting := max_jobs_setting()) is not None:
        return setting
    import torch

    return max(1, torch.cuda.device_count() if torch.cuda.is_available() else 1)


def submit(store: JobStore, recipe: str, config: RecipeConfig, *, start: bool = True, claim_pid: int | None = None,
           owner: str | None = None) -> Job:
    """Queue a job for `config` (a recipe config dataclass) and start it if a slot is free (with `claim_pid`:
    created running in that process instead, as a foreground run is). `owner`: who asks (the app's signed-in
    user); without one, the OS user (jobs.ownership)."""
    from dlguide_core.jobs.catalog import get_recipe
    from dlguide_core.jobs.ownership import os_user

    found = get_recipe(recipe)
    if not isinstance(config, found.config_cls):
        raise JobError(f"{recipe} takes a {found.config_cls.__name__}, not {type(config).__name__}")
    fields = asdict(config)
    check_devices(found.framework, fields)
    job = store.create(recipe, found.framework, fields, claim_pid=claim_pid, owner=owner or os_user())
    if start:
        dispatch(store)
    return store.get(job.id, refresh=False)


def check_devices(framework: str, fields: Mapping[str, object]) -> None:
    """A PyTorch job's devices and SyncBatchNorm checked before it is queued, not when it runs (DistributedError:
    a device this machine lacks). An evaluation job has no SyncBatchNorm; other frameworks are not checked."""
    if framework == "pytorch":
        from dlguide_core.training import distributed

        distributed.check_devices(str(fields["device"]), bool(fields.get("sync_batchnorm", False)))


def dispatch(store: JobStore, max_running: Callable[[], int] = max_concurrent) -> list[str]:
    """Start queued jobs while fewer than `max_running()` devices are busy; returns the ids started.
    `max_running` is asked at most once, and only when a queued job would start beside running ones."""
    store.refresh()
    started = []
    limit = lru_cache(maxsize=1)(max_running)
    while (job := store.claim_next(limit)) is not None:
        try:
            launch(store, job)
        except (DlguideError, OSError) as exc:  # no process: fail now instead of holding its slots until refresh
            store.finish(job.id, "failed", f"could not start: {exc}")
            continue
        started.append(job.id)
    return started


def launch(store: JobStore, job: Job) -> int:
    """Start the job's own process, detached (new session) so it outlives the app and the tab."""
    job_dir(job.id).mkdir(parents=True, exist_ok=True)
    env = job_env(job, os.environ)
    with open(log_path(job.id), "ab") as log:
        proc = subprocess.Popen(job_command(job),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=Path(__file__).resolve().parents[2], env=env)
    store.set_pid(job.id, proc.pid)
    return proc.pid


def job_env(job: Job, environ: Mapping[str, str]) -> dict[str, str]:
    """The job process's environment: its store, its threads and wait policy (dlguide_core.threads), its block of
    GPUs, and its slot among the GPUs it sees (gpu_slots.gpu_index: 0 when pinned to its block, else the queue's
    slot)."""
    from dlguide_core import threads
    from dlguide_core.gpu_slots import GPU_SLOT_ENV

    env = {**environ, "DLGUIDE_HOME": str(settings.home())}
    absolute_environment(env)  # the job runs in the checkout: a relative store path must not move with it
    env.update(threads.environment("job", env))  # a job's threads and wait policy, whoever launches it
    pinned = visible_devices_env(job.slot or 0, devices_of(job.config), env)
    env.update(pinned)
    env[GPU_SLOT_ENV] = "0" if pinned else str(job.slot or 0)
    return env


def visible_devices_env(slot: int, need: int, env: dict[str, str]) -> dict[str, str]:
    """Pin a multi-device job to its block of GPUs [slot, slot + need).

    torchrun's workers pick cuda:LOCAL_RANK, so without this two 4-GPU jobs on one 8-GPU
    machine would both land on GPUs 0-3. Single-device jobs use cuda:slot and need nothing.
    An existing CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES list is respected and sliced."""
    if need <= 1:
        return {}
    pinned = {}
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        current = [d for d in env.get(var, "").split(",") if d.strip()]
        pool = current or [str(i) for i in range(slot + need)]
        block = pool[slot:slot + need]
        if len(block) == need:
            pinned[var] = ",".join(block)
    return pinned


def job_command(job: Job) -> list[str]:
    """The job process: the job runner, or torchrun's agent over N workers (jobs.worker) for a distributed job."""
    if job.framework == "pytorch":
        spec = launch_spec_from_config(job.config)
        if spec.uses_torchrun:
            return torchrun_command(spec, job.id)
    return [sys.executable, "-m", "dlguide_core.jobs.runner", job.id]


def resume(store: JobStore, job_id: str, *, start: bool = True) -> Job:
    job = store.prepare_resume(job_id)
    if start:
        dispatch(store)
    return store.get(job.id, refresh=False)
