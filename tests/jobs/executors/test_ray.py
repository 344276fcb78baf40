"""The `ray` executor on a real local Ray head (tests/support/ray_cluster.py, one per session), and its refusals.

Inside the CI budget: the head starts once, the runs are tiny (toy images, few steps), and the three training
jobs are submitted together (`ray_jobs`), so their start-ups overlap on the head (4 logical CPUs: 1 + 2 + 1).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dlguide_core.cli.main import main
from dlguide_core.errors import DistributedError, StoreError
from dlguide_core.jobs.catalog import get_recipe
from dlguide_core.jobs.executors import ray_client, tracking
from dlguide_core.jobs.executors.base import SchedulerNotAnswering
from dlguide_core.jobs.executors.ray import RayExecutor, RayOptions
from dlguide_core.jobs.executors.ray_client import RayError
from dlguide_core.jobs.store import JobStore
from tests.support.ports import free_port
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for


def _config(data: Path, recipe: str = "cifar_net", **values):
    return get_recipe(recipe).make_config(data=str(data), workers=0, device="cpu", **values)


def _ray_log(executor: RayExecutor, job) -> str:
    return "\n".join(executor.logs(job))


@dataclass(frozen=True)
class RayJobs:
    home: Path
    inception: str
    ddp: str
    cancel: str


@pytest.fixture(scope="module")
def ray_jobs(ray_head, tmp_path_factory) -> Iterator[RayJobs]:
    """Three jobs submitted at once to the session's head, in one DLGUIDE_HOME the tests below share."""
    home = tmp_path_factory.mktemp("ray_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DLGUIDE_HOME", str(home))
        patch.setenv("DLGUIDE_OFFLINE", "1")
        store, executor, options = JobStore(), RayExecutor(), RayOptions(ray_address=ray_head.address)
        big = write_toy_dataset(home / "toy80", classes=2, per_class=6, val_per_class=1, size=80)
        small = write_toy_dataset(home / "toy32", classes=2, per_class=8, val_per_class=2)
        long = write_toy_dataset(home / "toy_long", classes=2, per_class=40, val_per_class=1)
        inception = _config(big, "inception_v3", epochs=1, batch_size=2, image_size=75, weights="none", max_steps=3)
        jobs = [executor.submit(store, "inception_v3", inception, options),
                executor.submit(store, "cifar_net", _config(small, epochs=1, batch_size=2, nproc_per_node=2), options),
                executor.submit(store, "cifar_net", _config(long, epochs=50, batch_size=1), options)]
        yield RayJobs(home, *(job.id for job in jobs))


@pytest.fixture
def ray_home(ray_jobs, monkeypatch) -> RayJobs:
    monkeypatch.setenv("DLGUIDE_HOME", str(ray_jobs.home))
    return ray_jobs


def _done(store: JobStore, executor: RayExecutor, job_id: str, timeout: float = 150):
    def what() -> str:
        job = store.get(job_id, refresh=False)
        return f"job {job_id} (still {job.status}); Ray's log:\n" + _ray_log(executor, job)[-3000:]

    return wait_for(lambda: (j := store.get(job_id, refresh=False)).status not in ("queued", "running") and j,
                    timeout=timeout, what=what)


@pytest.mark.slow
def test_an_inception_job_runs_on_ray_with_curves_streaming(ray_home, capsys) -> None:
    store, executor = JobStore(), RayExecutor()
    job = store.get(ray_home.inception, refresh=False)
    assert job.executor == "ray" and job.external_id.startswith(f"dlguide-{job.id}-")
    # curves stream: steps are in the store while the job still runs on Ray
    wait_for(lambda: store.get(job.id, refresh=False).status == "running" and store.last_step(job.id), timeout=120,
             what=lambda: "a first step while running; Ray's log:\n" + _ray_log(executor, store.get(job.id)))
    assert _done(store, executor, job.id).status == "succeeded"
    assert store.steps(job.id)["step"] == [1, 2, 3]
    wait_for(lambda: executor.status(store.get(job.id)).state == "SUCCEEDED", timeout=30)  # the process exits last
    assert main(["jobs", "show", job.id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["executor"], shown["external_id"], shown["status"]) == ("ray", job.external_id, "succeeded")
    log = _ray_log(executor, store.get(job.id))
    assert f"job {job.id} succeeded" in log and "epoch 1 step 3/3" in log
    assert executor.log_file(store.get(job.id)).read_text().splitlines() == log.splitlines()  # the page reads it


@pytest.mark.slow
def test_a_two_process_job_runs_torchrun_inside_the_ray_job(ray_home) -> None:
    store, executor = JobStore(), RayExecutor()
    assert _done(store, executor, ray_home.ddp).status == "succeeded"
    log = _ray_log(executor, store.get(ray_home.ddp))
    assert log.count("training on cpu") == 2, log[-2000:]  # one line per rank
    assert store.steps(ray_home.ddp)["step"] == [1, 2, 3, 4]  # 16 images / (2 per process x 2): one set of metrics


@pytest.mark.slow
def test_cancel_takes_the_checkpointed_stop_and_resume_continues_the_steps(ray_home) -> None:
    store, executor = JobStore(), RayExecutor()
    job_id = ray_home.cancel
    first_id = store.get(job_id, refresh=False).external_id
    wait_for(lambda: store.get(job_id, refresh=False).status == "running" and store.last_step(job_id), timeout=120)
    executor.cancel(store, store.get(job_id, refresh=False))
    cancelled = _done(store, executor, job_id, timeout=60)
    assert cancelled.status == "cancelled" and Path(cancelled.checkpoint).is_file()
    stopped_at = cancelled.checkpoint_step
    resumed = executor.resume(store, job_id)
    assert resumed.external_id not in (None, first_id)  # a new Ray submission
    wait_for(lambda: (store.last_step(job_id) or {}).get("step", 0) > stopped_at, timeout=120)
    executor.cancel(store, store.get(job_id, refresh=False))
    assert _done(store, executor, job_id, timeout=60).status == "cancelled"
    steps = store.steps(job_id)["step"]
    assert steps == sorted(set(steps)) and steps[-1] > stopped_at  # numbering continued, no repeats
    wait_for(lambda: executor.status(store.get(job_id)).state in ("SUCCEEDED", "STOPPED"), timeout=30)


def test_an_unreachable_head_is_one_line_and_jobs_keep_their_state(tmp_path: Path, monkeypatch) -> None:
    store, executor = JobStore(), RayExecutor()
    dead = f"http://127.0.0.1:{free_port()}"
    job = store.create("cifar_net", "pytorch", {}, executor="ray")
    from dlguide_core.jobs.executors.base import save_options

    save_options(job.id, RayOptions(ray_address=dead))
    store.set_external(job.id, "ray", "dlguide-x-1")
    with pytest.raises(SchedulerNotAnswering, match="Ray is not answering"):
        executor.status(store.get(job.id))
    report = tracking.sync(store)
    assert report.not_answering == {"ray": f"Ray is not answering at {dead}"}
    assert store.get(job.id).status == "queued"
    monkeypatch.setenv("RAY_ADDRESS", dead)
    ok, reason = executor.available()
    assert not ok and reason.startswith(f"Ray is not answering at {dead}")
    with pytest.raises(SchedulerNotAnswering):
        executor.submit(store, "cifar_net", _config(tmp_path, epochs=1), RayOptions())
    assert len(store.list_jobs()) == 1  # nothing queued by a refused submit


def test_refusals_are_one_line_before_anything_is_queued(tmp_path: Path, monkeypatch) -> None:
    store, executor = JobStore(), RayExecutor()
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("DLGUIDE_STORE_URL", raising=False)
    with pytest.raises(RayError, match="--ray-address"):
        executor.submit(store, "cifar_net", _config(tmp_path, epochs=1), RayOptions())
    assert executor.available() == (False, "no Ray address: pass --ray-address http://HEAD:8265 or set RAY_ADDRESS")
    with pytest.raises(StoreError, match="cannot write the embedded SQLite store: set DLGUIDE_STORE_URL"):
        executor.submit(store, "cifar_net", _config(tmp_path, epochs=1), RayOptions("http://10.9.8.7:8265"))
    multi = _config(tmp_path, epochs=1, nnodes=2, rdzv_endpoint="127.0.0.1:29500")
    with pytest.raises(DistributedError, match="--nnodes > 1 is not supported with --executor ray"):
        executor.submit(store, "cifar_net", multi, RayOptions("http://127.0.0.1:8265"))
    assert store.list_jobs() == []


def test_available_when_the_head_answers_and_an_unknown_submission_is_no_opinion(ray_head, monkeypatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", ray_head.address)
    assert RayExecutor().available() == (True, None)
    # a status poll between recording a (resumed) job's new submission id and Ray accepting it: keep the store's
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, executor="ray")
    store.set_external(job.id, "ray", f"dlguide-{job.id}-unknown")
    answer = RayExecutor().status(store.get(job.id))
    assert answer.status is None and answer.state == "UNKNOWN"
    assert not tracking.apply(store, job.id, answer) and store.get(job.id).status == "queued"
    assert ray_client.cluster_gpus(ray_head.address) == 0  # the test head is CPU-only: CPU jobs ask for CPUs


def test_a_lost_node_makes_the_job_interrupted_and_resumable(ray_head) -> None:
    """Ray reports a job whose supervisor (with its node) died as FAILED/JOB_SUPERVISOR_ACTOR_DIED: `interrupted`."""
    import psutil

    from dlguide_core.jobs.executors.base import save_options

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, executor="ray")
    save_options(job.id, RayOptions(ray_address=ray_head.address))
    store.claim(job.id, 1)  # as if its entrypoint had started on the lost node
    submission = ray_client.call(ray_head.address, "submit_job", entrypoint="sleep 61.25",
                                 submission_id=f"dlguide-{job.id}-lost")
    store.set_external(job.id, "ray", submission)
    sleeper = wait_for(lambda: next((p for p in psutil.process_iter(["cmdline"])
                                     if p.info["cmdline"] == ["sleep", "61.25"]), None), timeout=60)
    supervisor = next(p for p in sleeper.parents() if "JobSupervisor" in p.name() + " ".join(p.cmdline()))
    supervisor.kill()  # the node's processes vanish with it
    sleeper.kill()
    wait_for(lambda: tracking.sync(store).statuses.get(job.id, None) and store.get(job.id, refresh=False).status
             == "interrupted", timeout=60)
    job = store.get(job.id, refresh=False)
    assert job.error.startswith("Job supervisor actor died") and "\n" not in job.error
    assert store.prepare_resume(job.id).status == "queued"


def test_a_job_ray_holds_pending_is_queued_and_cancel_ends_it_there(ray_head, tmp_path: Path) -> None:
    """More CPUs than the head has: Ray keeps it PENDING (queued, with Ray's reason); Cancel ends it at once in the
    store. Ray 2.60 cannot stop a job whose supervisor is not placed yet (its stop waits for the placement): the
    store's word stands, and if Ray ever starts it, its entry finds it cancelled and runs nothing."""
    store, executor = JobStore(), RayExecutor()
    cfg = _config(tmp_path, epochs=1, nproc_per_node=16)  # 16 CPU processes: the head has 4
    job = executor.submit(store, "cifar_net", cfg, RayOptions(ray_address=ray_head.address))
    answer = executor.status(store.get(job.id, refresh=False))
    assert (answer.status, answer.state) == ("queued", "PENDING") and store.get(job.id).status == "queued"
    assert executor.cancel(store, store.get(job.id, refresh=False)).status == "cancelled"
    assert executor.status(store.get(job.id, refresh=False)).state in ("PENDING", "STOPPED")
    tracking.sync(store)
    assert store.get(job.id).status == "cancelled" and store.get(job.id).attempts == 0  # it never ran


def test_a_running_job_the_flag_did_not_stop_gets_rays_stop_after_the_grace(ray_head, monkeypatch) -> None:
    """The fallback: Cancel set the flag, the job did not stop (here: a process that never reads it), the grace is
    over: the next status poll asks Ray to stop it (SIGINT, dlguide's cancel), and Ray's STOPPED cancels it."""
    import os

    from dlguide_core.jobs.executors import ray_env
    from dlguide_core.jobs.executors.base import save_options

    monkeypatch.setattr(ray_env, "STOP_GRACE_S", 0)
    store, executor = JobStore(), RayExecutor()
    job = store.create("cifar_net", "pytorch", {}, executor="ray")
    save_options(job.id, RayOptions(ray_address=ray_head.address))
    store.claim(job.id, os.getpid())
    submission = ray_client.call(ray_head.address, "submit_job", entrypoint="sleep 62.5",
                                 submission_id=f"dlguide-{job.id}-deaf", runtime_env=ray_env.runtime_env(os.environ))
    store.set_external(job.id, "ray", submission)
    wait_for(lambda: executor.status(store.get(job.id, refresh=False)).state == "RUNNING", timeout=60)
    assert executor.cancel(store, store.get(job.id, refresh=False)).status == "running"  # the flag, nothing more
    assert executor.status(store.get(job.id, refresh=False)).state == "RUNNING"  # this poll asks Ray to stop it
    wait_for(lambda: tracking.sync(store).statuses[job.id].state == "STOPPED", timeout=60)
    assert store.get(job.id, refresh=False).status == "cancelled"
