"""A pid is judged only where it was taken: on its host, since its boot, in its PID namespace (issue 20).

Before, a reader in another PID namespace (a second container on the same volume) could not see a live
job's process, marked the job `interrupted`, and a resume then ran it twice.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from dlguide_core.jobs import liveness
from dlguide_core.jobs.store import JobStore
from tests.support.paths import ROOT
from tests.support.waiting import wait_for


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_set_pid_records_host_and_boot_id_with_the_pid() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    store.claim(job.id, os.getpid())
    job = store.get(job.id)
    assert (job.host, job.boot_id) == liveness.process_identity()
    assert open("/proc/sys/kernel/random/boot_id").read().strip() in job.boot_id


def test_a_job_on_another_host_is_not_judged_by_a_pid_here() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    store.claim(job.id, _dead_pid())
    store.set_host(job.id, "node17.cluster", "another-boot pid:[1]")
    assert store.refresh() == [] and store.get(job.id).status == "running"


def test_a_dead_pid_on_this_host_still_interrupts_the_job() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    store.claim(job.id, _dead_pid())
    assert store.refresh() == [job.id] and store.get(job.id).status == "interrupted"


def test_a_scheduler_job_before_its_process_says_where_it_runs_is_left_to_the_scheduler() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, executor="slurm")
    store.claim(job.id, _dead_pid())
    store.set_host(job.id, None, None)  # claimed on a node that has not recorded its host yet
    assert store.refresh() == [] and store.get(job.id).status == "running"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
def test_a_reader_in_another_pid_namespace_leaves_a_live_job_running() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        store.claim(job.id, sleeper.pid)
        reader = ("from dlguide_core.jobs.store import JobStore; s = JobStore(); "
                  f"print(s.refresh(), s.get({job.id!r}, refresh=False).status)")
        done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", reader],
                              cwd=ROOT, capture_output=True, text=True, timeout=60, env=os.environ.copy())
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["[]", "running"]
        assert store.get(job.id).status == "running"
    finally:
        sleeper.kill()
        sleeper.wait()


# --- Issue 33 (N7): a job whose process is not visible from here (its PID namespace gone with a restarted
# container, another host) is told apart from one alive elsewhere by its heartbeat, after a bounded wait.

def _unseen_job(store: JobStore, host: str, boot: str, quiet_s: float) -> str:
    """A running local job recorded at `host`/`boot`, whose last sign of life (heartbeat) was `quiet_s` ago."""
    job = store.create("cifar_net", "pytorch", {})
    store.claim(job.id, 4_000_000)  # a pid no process here has
    store.set_host(job.id, host, boot)
    with store.db.transaction() as db:
        db.execute("UPDATE jobs SET started = ? WHERE id = ?", (time.time() - 2 * liveness.UNSEEN_GRACE_S, job.id))
    beat = job.job_dir / liveness.HEARTBEAT_FILE
    beat.touch()
    os.utime(beat, (time.time() - quiet_s, time.time() - quiet_s))
    return job.id


def test_a_job_whose_pid_namespace_is_gone_becomes_interrupted_after_the_wait_and_can_be_resumed_or_deleted(
        capsys, monkeypatch) -> None:
    from dlguide_core.cli.main import main

    store = JobStore()
    host, boot = liveness.process_identity()
    gone_boot = boot.split()[0] + " pid:[4026599999]"  # this kernel, a PID namespace no longer here
    fresh = _unseen_job(store, host, gone_boot, quiet_s=5)
    stale = _unseen_job(store, host, gone_boot, quiet_s=liveness.UNSEEN_GRACE_S + 60)
    assert store.refresh() == [stale]
    assert main(["jobs", "show", fresh]) == 0
    assert "its process is not visible from here (on " in capsys.readouterr().out  # not the same as dead
    assert store.get(fresh).status == "running"  # alive elsewhere, as far as anyone can tell: left alone
    job = store.get(stale)
    assert job.status == "interrupted" and "in another PID namespace" in job.error and "not visible" in job.error
    monkeypatch.setattr("dlguide_core.jobs.queue.launch", lambda store, job: None)  # no process: just the queue
    assert main(["jobs", "resume", stale, "--detach"]) == 0 and store.get(stale).status in ("queued", "running")
    store.finish(stale, "cancelled")
    assert main(["jobs", "delete", stale]) == 0


def test_a_job_on_another_host_is_left_alone_while_it_beats_and_ended_when_it_stops() -> None:
    store = JobStore()
    alive = _unseen_job(store, "node17.cluster", "other-boot pid:[1]", quiet_s=liveness.HEARTBEAT_S)
    dead = _unseen_job(store, "node18.cluster", "other-boot pid:[1]", quiet_s=liveness.UNSEEN_GRACE_S + 1)
    assert store.refresh() == [dead]
    assert store.get(alive).status == "running" and "on host node18.cluster" in store.get(dead).error


def test_the_store_sink_beats_from_its_own_thread() -> None:
    from dlguide_core.jobs.store_sink import StoreSink

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    sink = StoreSink(store.url, job.id, flush_s=0.05)
    try:
        wait_for(lambda: (job.job_dir / liveness.HEARTBEAT_FILE).is_file(), timeout=60, what="the first heartbeat")
    finally:
        sink.close()


def test_a_scheduler_this_host_cannot_ask_leaves_its_jobs_unknown_here_and_the_listing_goes_on(
        monkeypatch, capsys) -> None:
    """N8: a Ray job with no Ray address here: `jobs list`/`show` exit 0 and say "unknown here"."""
    from dlguide_core.cli.main import main

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, executor="ray")
    store.set_external(job.id, "ray", "raysubmit_x")
    store.claim(job.id, 4_000_000)
    store.set_host(job.id, None, None)
    local = store.create("cifar_net", "pytorch", {})
    store.finish(local.id, "failed", "stopped by the test")
    assert main(["jobs", "list"]) == 0
    out, err = capsys.readouterr()
    assert f"{job.id}  cifar_net" in out and "(unknown here)" in out and local.id in out
    assert err.startswith("warning: ray cannot be asked from this host (no Ray address")
    assert main(["jobs", "show", job.id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["scheduler"]["state"] == "unknown here"
    assert main(["jobs", "show", job.id]) == 0
    assert "unknown here: ray cannot be asked" in capsys.readouterr().out
