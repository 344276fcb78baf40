"""A Slurm job that waits: its pending reason reaches `jobs show` and the Train page's note, and cancelling it
while pending (the page's Cancel button) ends it at once, in Slurm too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.executors import tracking
from dlguide_core.jobs.store import JobStore
from tests.support.apptest import open_app
from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


def test_pending_reason_is_shown_and_cancel_while_pending(slurm_cluster, tmp_path, capsys) -> None:
    blocker = slurm_cluster.command("sbatch", "--parsable", "--exclusive", "-o", "/dev/null", "--wrap",
                                    "sleep 120").strip()
    try:
        wait_for(lambda: "RUNNING" in slurm_cluster.command("squeue", "-h", "-j", blocker, "-o", "%T"),
                 timeout=60, what="the blocking job to hold the node")
        data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=1, val_per_class=1)
        done = subprocess.run([sys.executable, "-m", "dlguide_core", "train", "--recipe", "cifar_net", "--data",
                               str(data), "--workers", "0", "--device", "cpu", "--executor", "slurm", "--detach",
                               "--json"], cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        job_id = json.loads(done.stdout)["job_id"]
        store = JobStore()
        report = tracking.sync(store)
        assert report.statuses[job_id].status == "queued" and report.statuses[job_id].state == "PENDING"
        assert report.statuses[job_id].reason == "Slurm: waiting for resources"
        capsys.readouterr()
        assert main(["jobs", "show", job_id]) == 0
        assert "Slurm: waiting for resources" in capsys.readouterr().out
        page = open_app("pages/train.py")  # the Train page: the reason in the job's note; its Cancel button
        assert not page.exception, page.exception
        table = page.dataframe[0].value
        assert list(table["job"]) == [job_id] and list(table["note"]) == ["Slurm: waiting for resources"]
        page.button(key="train_cancel").click().run()
        assert not page.exception and not page.error, [e.value for e in page.error]
        assert store.get(job_id).status == "cancelled"
        external = store.get(job_id).external_id
        assert "CANCELLED" in slurm_cluster.command("squeue", "-h", "-t", "all", "-j", external, "-o", "%T")
    finally:
        slurm_cluster.command("scancel", blocker)
