"""The `ray` executor: a dlguide job submitted to a Ray cluster through Ray's job API (JobSubmissionClient).

- Submit: the job's row (executor "ray"), then `submit_job` with the entrypoint jobs.executors.ray_entry (the
  same runner a local job runs; torchrun inside the Ray job for N processes on one node), its GPUs (or CPUs on
  a CPU job) as entrypoint resources, and the store and checkout through the runtime environment's variables
  (never a password: Ray shows a job's runtime environment to anyone who reaches its dashboard).
  The Ray submission id is the job's `external_id` (a new one at each resume). The address (`--ray-address`,
  else RAY_ADDRESS) is kept in the job folder with the options, so status, logs and resume find the head.
- Several nodes are refused in one line for now (see docs/CLUSTERS.md, "Ray"): a multi-node run would need Ray
  Train's TorchTrainer in place of torchrun, a second worker entry and a writer rank chosen on Ray's workers.
- Workers on other hosts cannot write the embedded SQLite store: a head that is not on this machine needs
  DLGUIDE_STORE_URL (PostgreSQL), else the submit is refused in one line.
- Cancel takes the same checkpointed stop as a local job: the store's cancel flag. Ray's `stop_job` (SIGINT,
  dlguide's "cancel", then SIGKILL after ray_env.STOP_GRACE_S) is the fallback: for a second Cancel, and from the
  status poll when the flag has not stopped the job within the grace. A pending job is cancelled in the store at
  once (Ray's stop is asked too, but takes effect only once Ray places it; its entry then runs nothing).
- Every request has a deadline (jobs.executors.ray_client); a head that does not answer is `SchedulerNotAnswering`,
  and the jobs keep their last known state (jobs.executors.tracking).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlguide_core.errors import DistributedError, StoreError, first_line
from dlguide_core.jobs.executors import ray_client, ray_env
from dlguide_core.jobs.executors.base import (
    Availability,
    Executor,
    ExternalStatus,
    SchedulerNotAnswering,
    load_options,
)
from dlguide_core.jobs.executors.ray_client import RayError
from dlguide_core.jobs.job import LaunchFields, launch_fields
from dlguide_core.jobs.store import RESUMABLE, Job, JobStore, job_dir
from dlguide_core.jobs.store_url import mask_url

if TYPE_CHECKING:
    from dlguide_core.training.recipes import Recipe, RecipeConfig

STORE_URL_ENV = "DLGUIDE_STORE_URL"
RAY_LOG_FILE = "ray.log"  # in the job folder: the last copy of Ray's job log
CANCEL_FILE = "ray_cancel.json"  # in the job folder: when Cancel was asked (the stop_job fallback's clock)
AVAILABLE_TTL_S = 10.0  # the Train page asks on every rerun: one probe per this many seconds


@dataclass(frozen=True)
class RayOptions:
    ray_address: str = ""  # `--ray-address`; empty: RAY_ADDRESS


def shared_store() -> bool:
    """Whether the job store is one that other hosts reach (a DLGUIDE_STORE_URL that is not SQLite)."""
    url = os.environ.get(STORE_URL_ENV, "").strip()
    return bool(url) and not url.startswith("sqlite")


def check_submittable(address: str, launch: LaunchFields) -> None:
    """One line for a job this executor cannot run, before anything is queued (usage errors: the CLI exits 2)."""
    if launch.nnodes > 1:
        raise DistributedError("--nnodes > 1 is not supported with --executor ray yet: run one node with "
                               "--nproc-per-node N (torchrun inside the Ray job), or use --executor slurm")
    if not ray_client.is_loopback(address) and not shared_store():
        raise StoreError(f"Ray workers on other hosts cannot write the embedded SQLite store: set {STORE_URL_ENV} to "
                         "a PostgreSQL store every node reaches (docs/CLUSTERS.md)")


def _first_line(message: str | None) -> str | None:
    """Ray's messages run to many lines (an actor's death names its pid, namespace, causes): the store keeps one."""
    return first_line(message or "") or None


def new_submission_id(job_id: str) -> str:
    """Ray's id for one attempt of a job: the job's id and a fresh suffix (Ray refuses an id it has seen)."""
    return f"dlguide-{job_id}-{secrets.token_hex(3)}"


class RayExecutor(Executor[RayOptions]):
    name = "ray"
    options_cls = RayOptions
    # train flags (argparse dests) that mean nothing here, with the one-line reason (read by the CLI)
    refused_flags = {"rdzv_endpoint": "torchrun inside the Ray job rendezvouses on its own node",
                     "node_rank": "Ray starts the job's processes itself"}

    def __init__(self) -> None:
        self._available: tuple[float, str, Availability] | None = None

    def available(self) -> Availability:
        """Ray importable and RAY_ADDRESS answering (a 2 s probe, remembered for AVAILABLE_TTL_S)."""
        if (reason := ray_client.ray_importable()) is not None:
            return Availability(False, reason)
        try:
            address = ray_client.resolve_address(None)
        except RayError as exc:
            return Availability(False, str(exc))
        cached = self._available
        if cached and cached[1] == address and time.monotonic() - cached[0] < AVAILABLE_TTL_S:
            return cached[2]
        reason = ray_client.probe(address)
        answer = Availability(reason is None, reason)
        self._available = (time.monotonic(), address, answer)
        return answer

    def submit_warnings(self, options: RayOptions | None = None) -> tuple[str, ...]:
        """A store URL with a password is not sent to Ray (its job record shows the runtime environment)."""
        url = os.environ.get(STORE_URL_ENV, "").strip()
        if url and ray_env.store_secrets(url):
            return (f"{STORE_URL_ENV} holds a password, which Ray would show in its job list: it is not sent; the Ray "
                    f"nodes need {STORE_URL_ENV} in the environment `ray start` runs with (docs/CLUSTERS.md)",)
        return ()

    def check(self, recipe: Recipe, config: RecipeConfig, options: RayOptions) -> RayOptions:
        """One node, a store the workers reach, a head that answers; the address kept is the one resolved."""
        address = ray_client.resolve_address(options.ray_address)
        check_submittable(address, launch_fields(asdict(config)))
        if (reason := ray_client.probe(address)) is not None:
            raise SchedulerNotAnswering(reason)
        return RayOptions(ray_address=address)

    def hand_over(self, store: JobStore, job: Job, options: RayOptions, submission_id: str | None = None) -> Job:
        """`submit_job` for the queued row; the job fails with the one-line reason if Ray refuses it.

        The submission id is recorded before the request: a status poll in between then finds an id Ray does
        not know yet (no opinion), never the previous attempt's finished submission."""
        address = ray_client.resolve_address(options.ray_address)
        submission_id = submission_id or new_submission_id(job.id)
        store.set_external(job.id, self.name, submission_id)
        (job_dir(job.id) / CANCEL_FILE).unlink(missing_ok=True)
        try:
            gpus = ray_client.cluster_gpus(address) if job.launch.device == "auto" else None
            ray_client.call(address, "submit_job", entrypoint=ray_env.entrypoint(job.id), submission_id=submission_id,
                            runtime_env=ray_env.runtime_env(os.environ), metadata={"dlguide_job": job.id},
                            **ray_env.resources(job.launch, gpus_on_cluster=bool(gpus)))
        except RayError as exc:
            store.finish(job.id, "failed", f"Ray refused the job: {exc}")
            raise
        return store.get(job.id, refresh=False)

    def resume(self, store: JobStore, job_id: str) -> Job:
        """A new submission from the last checkpoint (its id recorded before the job is queued again)."""
        job = store.get(job_id)
        submission_id = new_submission_id(job_id)
        if job.status in RESUMABLE:
            store.set_external(job_id, self.name, submission_id)
        job = store.prepare_resume(job_id)  # refuses, in one line, a job that is not resumable
        return self.hand_over(store, job, load_options(job_id, RayOptions), submission_id)

    def status(self, job: Job) -> ExternalStatus:
        submission_id = job.external_id
        if not submission_id:
            return ExternalStatus(None, None, "")
        address = self._address(job)
        try:
            state = ray_client.job_state(address, submission_id)
        except RayError as exc:
            if ray_client.probe(address) is None:  # the head answers: it no longer knows the job
                return ExternalStatus(None, str(exc), "UNKNOWN")
            raise SchedulerNotAnswering(f"Ray is not answering at {mask_url(address)}") from None
        if state.ray_status == "RUNNING" and job.cancel_requested and self._grace_over(job):
            self._stop(address, submission_id)  # the flag did not stop it: Ray's stop (SIGINT, then SIGKILL)
        reason = _first_line(state.message) if state.status in ("queued", "failed", "interrupted") else None
        return ExternalStatus(state.status, reason, state.ray_status)

    def cancel(self, store: JobStore, job: Job) -> Job:
        """The store's flag (a checkpointed stop at the next step); Ray's stop for a pending job or a second Cancel."""
        again = job.status == "running" and job.cancel_requested
        job = store.request_cancel(job.id)
        if job.status == "running" and not again:
            (job_dir(job.id) / CANCEL_FILE).write_text(json.dumps({"time": time.time()}))
        elif job.external_id:  # cancelled while pending (Ray must not start it), or asked twice
            try:
                self._stop(self._address(job), job.external_id)
            except RayError:
                pass  # no address any more: the flag (or the claim that now fails) still stops it
        return job

    def log_file(self, job: Job) -> Path:
        """A copy of Ray's job log in the job folder (`ray.log`), refreshed from the head when it answers (the page's
        "log" link and `jobs logs` read it); the last copy stays when the head does not answer."""
        path = job_dir(job.id) / RAY_LOG_FILE
        if job.external_id:
            try:
                text = ray_client.call(self._address(job), "get_job_logs", job.external_id)
            except RayError:
                return path
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
        return path

    def logs(self, job: Job, follow: bool = False, is_final: Callable[[], bool] | None = None,
             poll_s: float = 1.0) -> Iterator[str]:
        """Ray's job log (its driver output: our entrypoint's); with `follow`, new lines until `is_final()`.
        The store's ending comes before the process exits: the last read waits for Ray's ending too (10 s at most)."""
        if not job.external_id:
            return
        address, seen = self._address(job), 0
        while True:
            final = is_final() if (follow and is_final) else not follow
            if final and follow:
                self._wait_ray_final(address, job.external_id)
            try:
                text = ray_client.call(address, "get_job_logs", job.external_id)
            except RayError as exc:
                raise SchedulerNotAnswering(str(exc)) from None
            complete = text if final else text[:text.rfind("\n") + 1]
            if len(complete) > seen:
                yield from complete[seen:].splitlines()
                seen = len(complete)
            if final:
                return
            time.sleep(poll_s)

    def _wait_ray_final(self, address: str, submission_id: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if ray_client.job_state(address, submission_id).ray_status in ray_client.FINAL:
                    return
            except RayError:
                return
            time.sleep(0.3)

    def _address(self, job: Job) -> str:
        return ray_client.resolve_address(load_options(job.id, RayOptions).ray_address)

    def _grace_over(self, job: Job) -> bool:
        try:
            asked = json.loads((job_dir(job.id) / CANCEL_FILE).read_text())["time"]
        except (OSError, ValueError, KeyError):
            return False
        return time.time() - asked > ray_env.STOP_GRACE_S

    def _stop(self, address: str, submission_id: str) -> None:
        try:
            ray_client.call(address, "stop_job", submission_id)
        except RayError:
            pass  # already finished, or the head is gone: the tracker keeps the last known state
