"""Across hosts for real: a 2-node Slurm job whose nodes are network namespaces (own address, host name and
slurmd), rendezvous (c10d) from one to the other, metrics into a PostgreSQL store reached over the network."""

from __future__ import annotations

import sys

import pytest

from tests.support import slurm_hosts
from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hosts(slurm_cluster, tmp_path_factory: pytest.TempPathFactory):
    if reason := slurm_hosts.missing_reason():
        pytest.skip(reason)
    started = slurm_hosts.start_hosts(tmp_path_factory.mktemp("hosts") / "cluster")
    yield started
    started.stop()


def test_two_node_job_rendezvous_across_hosts_with_a_postgresql_store(hosts, tmp_path) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=4, val_per_class=1)
    env = {"DLGUIDE_HOME": str(tmp_path / "home"), "DLGUIDE_STORE_URL": hosts.store_url}
    done = hosts.run_in("ctl", [sys.executable, "-m", "dlguide_core", "train", "--recipe", "cifar_net", "--data",
                                str(data), "--max-steps", "4", "--batch-size", "2", "--workers", "0", "--device", "cpu",
                                "--nnodes", "2", "--nproc-per-node", "1", "--executor", "slurm", "--json"],
                        env=env, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rendezvous on n1:" in done.stdout and "running in process" in done.stdout
    # the dashboard's side (namespace ctl) reads the store the nodes wrote to over the network
    reader = hosts.run_in("ctl", [sys.executable, "-c", (
        "from dlguide_core.jobs.store import open_store; s = open_store(); j = s.list_jobs(refresh=False)[0]; "
        "print(j.status, j.host, j.executor, len(s.steps(j.id)['step']))")], env=env, cwd=ROOT,
        capture_output=True, text=True, timeout=120)
    assert reader.stdout.split() == ["succeeded", "n1", "slurm", "4"], reader.stderr
    assert f"{hosts.tag}pw" not in done.stdout + done.stderr  # the store's password never in the output
    kept = [path for path in (tmp_path / "home").rglob("*") if path.is_file()]
    assert {"sbatch.sh", "executor.json"} <= {path.name for path in kept}, kept
    assert any(path.name.startswith("slurm-") and path.suffix == ".out" for path in kept), kept
    for path in kept:  # the batch script, Slurm's output, the saved options...: the URL went by environment only
        assert f"{hosts.tag}pw".encode() not in path.read_bytes(), path


def test_sqlite_store_with_nodes_on_other_hosts_is_named_at_submit(hosts) -> None:
    """The embedded SQLite store cannot take metrics from other hosts: one line with the fix, before submitting."""
    check = ("from dlguide_core.jobs.executors.slurm import SlurmExecutor; "
             "print(SlurmExecutor().submit_warnings())")
    done = hosts.run_in("ctl", [sys.executable, "-c", check], env={"DLGUIDE_STORE_URL": ""}, cwd=ROOT,
                        capture_output=True, text=True, timeout=120)
    assert "a job on n1, n2 cannot report its metrics: set DLGUIDE_STORE_URL=postgresql://" in done.stdout, done.stderr
    with_pg = hosts.run_in("ctl", [sys.executable, "-c", check], env={"DLGUIDE_STORE_URL": hosts.store_url}, cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert with_pg.stdout.strip() == "()"
