"""Across hosts for real: a 2-node Slurm job whose nodes are network namespaces (own address, host name and
slurmd), rendezvous (c10d) from one to the other, metrics into a PostgreSQL store reached over the network."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.support import slurm_hosts
from tests.support.paths import ROOT
from tests.support.store_watch import JobWatch
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for

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


# About 10 s of steps on a quiet box (well over a minute under a load of 10): the kill, sent as soon as the
# watcher sees a checkpoint at KILL_AFTER_STEP or later, lands long before the end. Not "once a step past a
# checkpoint is seen": the store's step and checkpoint rows are written together at each epoch's end (3 steps an
# epoch, 0.25 s flushes), so a fast run can end without the watcher ever seeing one (a CI run did, 2026-12-02).
NODE_FAIL_STEPS = 150
KILL_AFTER_STEP = 6


def test_a_node_that_dies_mid_run_is_requeued_and_the_same_job_resumes_from_its_checkpoint(hosts, tmp_path) -> None:
    """Issue 32, node failure: n2 dies (SIGKILL to slurmd and the job's processes there) past a checkpoint;
    slurmctld declares it DOWN and requeues the job (--requeue); n2 comes back; the same dlguide job resumes from
    its checkpoint and succeeds, each step and epoch recorded once, the restart counted and said why."""
    # 3 classes x 4 images over 2 ranks at batch 2: 3 steps an epoch, a checkpoint at each epoch's end
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=4, val_per_class=1)
    env = {"DLGUIDE_HOME": str(tmp_path / "home"), "DLGUIDE_STORE_URL": hosts.store_url}
    done = hosts.run_in("ctl", [sys.executable, "-m", "dlguide_core", "train", "--recipe", "cifar_net", "--data",
                                str(data), "--epochs", "1000", "--max-steps", str(NODE_FAIL_STEPS), "--batch-size", "2",
                                "--workers", "0", "--device", "cpu", "--nnodes", "2", "--nproc-per-node", "1",
                                "--executor", "slurm", "--detach", "--json"],
                        env=env, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    job_id, external = json.loads(done.stdout)["job_id"], json.loads(done.stdout)["external_id"]
    log = tmp_path / "home" / "jobs" / job_id / f"slurm-{external}.out"

    def tail() -> str:
        return log.read_text(errors="replace")[-4000:] if log.is_file() else "(no log)"

    watch = JobWatch(hosts.popen_in("ctl", [sys.executable, "-m", "tests.support.store_watch", job_id], env=env,
                                    cwd=ROOT, stdout=subprocess.PIPE, text=True))
    try:
        before = watch.until(lambda s: s["status"] == "running" and (s["checkpoint_step"] or 0) >= KILL_AFTER_STEP,
                             300, lambda: f"a checkpoint at step {KILL_AFTER_STEP} or later; log:\n" + tail())
        killed = hosts.kill_node("n2")
        assert before["step"] < NODE_FAIL_STEPS and any("dlguide_core.jobs.worker" in k for k in killed), killed
        # back only once slurmctld has seen it die: a node back within SlurmdTimeout, with the host's uptime,
        # answers its pings as if nothing happened, and the job's srun waits on for the lost task
        wait_for(lambda: "DOWN" in hosts.node_state("n2"), timeout=180, every=0.5, what="slurmctld to declare n2 DOWN")
        hosts.restore_node("n2")
        final = watch.until(lambda s: s.get("final"), 600, lambda: "the job to end; log:\n" + tail())
    finally:
        watch.close()
    job = final["job"]
    assert final["status"] == "succeeded", tail()
    assert job["external_id"] == external and job["restarts"] >= 1, job  # the same job, Slurm's same job id
    note = re.fullmatch(r"a node failed at step (\d+)", job["restart_note"] or "")  # the last checkpoint's step
    assert note and before["checkpoint_step"] <= int(note[1]) < NODE_FAIL_STEPS, (job["restart_note"], watch.lines)
    assert final["steps"] == list(range(1, NODE_FAIL_STEPS + 1))  # each step once: the redone ones replaced
    assert final["epochs"] == list(range(len(final["epochs"])))
    # meanwhile: interrupted (its ranks lost a peer), queued (requeued), running again; never failed or cancelled
    assert {line["status"] for line in watch.lines} <= {"queued", "running", "interrupted", "succeeded"}, watch.lines
    text = log.read_text(errors="replace")
    assert "DUE TO NODE FAILURE" in text and f"resuming from checkpoint step {note[1]}" in text, text[-4000:]
