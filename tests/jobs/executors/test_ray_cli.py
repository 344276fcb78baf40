"""The `ray` executor through the CLI and the Train page on a real local head: `train --executor ray --ray-address
URL` (without RAY_ADDRESS), curves in the store while it runs, cancel (the checkpointed stop: the page's button,
then `jobs cancel`), resume from the page's button (steps continue), `jobs logs [--follow]` (Ray's log),
`jobs show --json` (executor, external_id); several nodes refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.store import JobStore
from tests.support.apptest import open_app
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


def test_train_cancel_resume_logs_and_show_through_the_cli(ray_head, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # --ray-address alone names the head
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=40, val_per_class=1)
    code = main(["train", "--recipe", "cifar_net", "--data", str(data), "--epochs", "50", "--workers", "0",
                 "--batch-size", "1", "--device", "cpu", "--executor", "ray", "--ray-address", ray_head.address,
                 "--detach", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    job_id = json.loads(out.out)["job_id"]
    store = JobStore()
    wait_for(lambda: store.get(job_id).status == "running" and store.last_step(job_id), timeout=120,
             what="the Ray job's first step in the store")
    page = open_app("pages/train.py")  # the first cancel and the resume from the Train page, the second by the CLI
    assert not page.exception and list(page.dataframe[0].value["job"]) == [job_id], page.exception
    page.button(key="train_cancel").click().run()
    assert not page.exception and not page.error, [e.value for e in page.error]
    assert store.get(job_id).cancel_requested
    wait_for(lambda: main(["jobs", "show", job_id, "--json"]) == 0 and store.get(job_id).status == "cancelled",
             timeout=90, what="the cancelled Ray job to stop with its checkpoint")
    stopped = store.get(job_id).checkpoint_step
    assert stopped, "a cancelled job keeps a checkpoint"
    first = store.get(job_id).external_id
    page.run()  # the page, the job now cancelled: its Resume button (`jobs resume` is tested on Slurm)
    page.button(key="train_resume").click().run()
    assert not page.exception and not page.error, [e.value for e in page.error]
    assert store.get(job_id).external_id not in (None, first)  # a new Ray submission
    wait_for(lambda: (store.last_step(job_id) or {}).get("step", 0) > stopped, timeout=120,
             what="the resumed run's steps past the checkpoint")
    assert main(["jobs", "cancel", job_id]) == 0
    capsys.readouterr()
    assert main(["jobs", "logs", job_id, "--follow"]) == 0  # Ray's job log, followed until the job ends
    followed = capsys.readouterr().out
    assert store.get(job_id).status == "cancelled" and f"job {job_id} cancelled" in followed, followed[-2000:]
    steps = store.steps(job_id)["step"]
    assert steps == list(range(1, len(steps) + 1)) and steps[-1] > stopped  # continued, no gap, no repeat
    capsys.readouterr()
    assert main(["jobs", "logs", job_id]) == 0
    assert f"job {job_id} cancelled" in capsys.readouterr().out
    assert main(["jobs", "show", job_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["executor"] == "ray" and shown["external_id"].startswith("dlguide-")
    assert main(["train", "--recipe", "cifar_net", "--data", str(data), "--executor", "ray", "--nnodes", "2",
                 "--ray-address", ray_head.address]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0  # one line
