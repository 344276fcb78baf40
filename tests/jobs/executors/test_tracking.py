"""The tracker applies a scheduler's final word only to jobs that could not record their own ending; the
registry declares every executor once; the Slurm states map as issue 20's table says."""

from __future__ import annotations

import os

from dlguide_core.jobs.executors import registry, tracking
from dlguide_core.jobs.executors.base import ExternalStatus
from dlguide_core.jobs.executors.slurm import STATES
from dlguide_core.jobs.executors.slurm_script import signal_lead, time_seconds
from dlguide_core.jobs.store import JobStore


def _running(store: JobStore) -> str:
    job = store.create("cifar_net", "pytorch", {}, executor="slurm")
    store.claim(job.id, os.getpid())
    return job.id


def test_a_final_scheduler_state_ends_a_job_that_said_nothing() -> None:
    store = JobStore()
    job_id = _running(store)
    assert tracking.apply(store, job_id, ExternalStatus("interrupted", "Slurm job 7 TIMEOUT: the time limit "
                                                        "ended it", "TIMEOUT"))
    job = store.get(job_id)
    assert job.status == "interrupted" and "TIMEOUT" in job.error


def test_a_clean_exit_without_a_recorded_result_is_interrupted_not_succeeded() -> None:
    store = JobStore()
    job_id = _running(store)
    tracking.apply(store, job_id, ExternalStatus("succeeded", None, "COMPLETED"))
    assert store.get(job_id).status == "interrupted"


def test_a_job_that_recorded_its_ending_is_never_overwritten() -> None:
    store = JobStore()
    job_id = _running(store)
    store.finish(job_id, "succeeded")
    assert not tracking.apply(store, job_id, ExternalStatus("failed", "NonZeroExitCode", "FAILED"))
    assert store.get(job_id).status == "succeeded"


def test_the_ended_batch_job_of_a_resumed_job_is_not_read_as_the_new_run() -> None:
    """A sync between `resume`'s prepare and its sbatch saw the old batch job's end (COMPLETED after a
    checkpointed TERM) and ended the freshly queued run with it."""
    store = JobStore()
    job_id = _running(store)
    store.set_external(job_id, "slurm", "7")
    store.finish(job_id, "interrupted", "SIGTERM: the time limit")
    resumed = store.prepare_resume(job_id)
    assert resumed.status == "queued" and resumed.external_id is None  # the old id names the ended batch job
    assert not tracking.apply(store, job_id, ExternalStatus("succeeded", None, "COMPLETED"), asked="7")
    store.set_external(job_id, "slurm", "8")
    assert not tracking.apply(store, job_id, ExternalStatus("succeeded", None, "COMPLETED"), asked="7")
    assert store.get(job_id).status == "queued"


def test_pending_and_running_answers_leave_the_store_alone() -> None:
    store = JobStore()
    job_id = _running(store)
    assert not tracking.apply(store, job_id, ExternalStatus("queued", "Slurm: waiting for resources", "PENDING"))
    assert store.get(job_id).status == "running"


def test_states_map_as_the_issue_says() -> None:
    expected = {"PENDING": "queued", "RUNNING": "running", "COMPLETED": "succeeded", "CANCELLED": "cancelled",
                "TIMEOUT": "interrupted", "NODE_FAIL": "interrupted", "PREEMPTED": "interrupted",
                "FAILED": "failed", "OUT_OF_MEMORY": "failed"}
    assert {state: STATES[state] for state in expected} == expected


def test_the_registry_declares_local_slurm_and_ray_once() -> None:
    assert registry.names() == ("local", "slurm", "ray")
    assert registry.get_executor("local").available() == (True, None)
    assert registry.get_executor("local") is registry.get_executor("local")


def test_time_limits_and_the_signal_lead() -> None:
    assert time_seconds("00:01:00") == 60 and time_seconds("1-02:00:00") == 93600 and time_seconds("90") == 5400
    assert signal_lead(None) == 60 and signal_lead("02:00:00") == 60 and signal_lead("00:01:00") == 30


def test_every_executor_records_who_submitted(monkeypatch) -> None:
    """The Train page passes the signed-in user to whichever executor runs the job (issue 22): a `submit`
    without `owner` broke Run on = Ray with a TypeError."""
    import inspect

    for name in registry.names():
        params = inspect.signature(type(registry.get_executor(name)).submit).parameters
        assert "owner" in params and params["owner"].default is None, name
