"""The Ray job's entrypoint, runtime environment and resources."""

from __future__ import annotations

from dlguide_core.jobs.executors import ray_env
from dlguide_core.jobs.job import launch_fields
from tests.support.paths import ROOT


def test_resources_ask_gpus_per_process_or_cpus_on_a_cpu_job() -> None:
    assert ray_env.resources(launch_fields({"device": "cuda", "nproc_per_node": 4})) == {
        "entrypoint_num_gpus": 4.0, "entrypoint_num_cpus": 0.0}
    assert ray_env.resources(launch_fields({"device": "cpu", "nproc_per_node": 2})) == {"entrypoint_num_cpus": 2.0}
    assert ray_env.resources(launch_fields({"device": "auto"}), gpus_on_cluster=False) == {"entrypoint_num_cpus": 1.0}
    assert ray_env.resources(launch_fields({"device": "auto"}), gpus_on_cluster=True)["entrypoint_num_gpus"] == 1.0
    # a TensorFlow config has no device field
    assert ray_env.resources(launch_fields({})) == {"entrypoint_num_cpus": 1.0}


def test_runtime_env_carries_the_store_and_checkout_never_a_working_dir_or_a_secret(isolated_home) -> None:
    env = ray_env.runtime_env({"DLGUIDE_STORE_URL": "postgresql://dlguide@db:5432/x", "HOME": "/root", "PATH": "/bin",
                               "DLGUIDE_OFFLINE": "1", "DLGUIDE_OIDC_CLIENT_SECRET": "s3cret"})
    assert set(env) == {"env_vars"}  # no working_dir: Ray would upload the checkout, .venv included
    assert env["env_vars"]["DLGUIDE_HOME"] == str(isolated_home)
    assert env["env_vars"]["PYTHONPATH"] == str(ROOT)
    assert env["env_vars"]["DLGUIDE_STORE_URL"] == "postgresql://dlguide@db:5432/x"  # no password: it travels
    assert env["env_vars"]["DLGUIDE_OFFLINE"] == "1"
    assert not {"PATH", "HOME", "DLGUIDE_OIDC_CLIENT_SECRET"} & set(env["env_vars"])
    assert env["env_vars"]["RAY_JOB_STOP_SIGNAL"] == "SIGINT"  # dlguide's "cancel", not SIGTERM's "interrupted"
    assert int(env["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"]) >= 30  # Ray's 3 s cuts a checkpoint short


def test_a_store_password_never_enters_rays_job_record() -> None:
    """Ray shows a job's runtime environment in its dashboard and `ray job list`: the nodes' own variable is used."""
    env = ray_env.runtime_env({"DLGUIDE_STORE_URL": "postgresql://dlguide:pw123@db:5432/x"})["env_vars"]
    assert "DLGUIDE_STORE_URL" not in env and "pw123" not in repr(env)


def test_submit_warns_that_the_nodes_need_their_own_store_url(monkeypatch) -> None:
    from dlguide_core.jobs.executors.ray import RayExecutor

    monkeypatch.setenv("DLGUIDE_STORE_URL", "postgresql://dlguide:pw123@db:5432/x")
    (warning,) = RayExecutor().submit_warnings()
    assert "not sent" in warning and "pw123" not in warning
    monkeypatch.setenv("DLGUIDE_STORE_URL", "postgresql://dlguide@db:5432/x")
    assert RayExecutor().submit_warnings() == ()


def test_entrypoint_names_the_job_and_no_secret() -> None:
    command = ray_env.entrypoint("20260101-000000-abcd", python="/opt/py/bin/python")
    assert command == "/opt/py/bin/python -m dlguide_core.jobs.executors.ray_entry 20260101-000000-abcd"
