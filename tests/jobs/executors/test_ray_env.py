"""The Ray job's entrypoint, runtime environment and resources."""

from __future__ import annotations

from dlguide_core.jobs.executors import ray_env
from tests.support.paths import ROOT


def test_resources_ask_gpus_per_process_or_cpus_on_a_cpu_job() -> None:
    assert ray_env.resources({"device": "cuda", "nproc_per_node": 4}) == {"entrypoint_num_gpus": 4.0,
                                                                          "entrypoint_num_cpus": 0.0}
    assert ray_env.resources({"device": "cpu", "nproc_per_node": 2}) == {"entrypoint_num_cpus": 2.0}
    assert ray_env.resources({"device": "auto"}, gpus_on_cluster=False) == {"entrypoint_num_cpus": 1.0}
    assert ray_env.resources({"device": "auto"}, gpus_on_cluster=True)["entrypoint_num_gpus"] == 1.0
    assert ray_env.resources({}) == {"entrypoint_num_cpus": 1.0}  # a TensorFlow config has no device field


def test_runtime_env_carries_the_store_and_checkout_never_a_working_dir(isolated_home) -> None:
    env = ray_env.runtime_env({"DLGUIDE_STORE_URL": "postgresql://u:p@db/x", "HOME": "/root", "PATH": "/bin"})
    assert set(env) == {"env_vars"}  # no working_dir: Ray would upload the checkout, .venv included
    assert env["env_vars"]["DLGUIDE_HOME"] == str(isolated_home)
    assert env["env_vars"]["PYTHONPATH"] == str(ROOT)
    assert env["env_vars"]["DLGUIDE_STORE_URL"] == "postgresql://u:p@db/x"
    assert "PATH" not in env["env_vars"] and "HOME" not in env["env_vars"]
    assert env["env_vars"]["RAY_JOB_STOP_SIGNAL"] == "SIGINT"  # dlguide's "cancel", not SIGTERM's "interrupted"
    assert int(env["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"]) >= 30  # Ray's 3 s cuts a checkpoint short


def test_entrypoint_names_the_job_and_no_secret() -> None:
    command = ray_env.entrypoint("20260101-000000-abcd", python="/opt/py/bin/python")
    assert command == "/opt/py/bin/python -m dlguide_core.jobs.executors.ray_entry 20260101-000000-abcd"
