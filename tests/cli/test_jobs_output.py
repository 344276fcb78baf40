"""`jobs list` and `jobs show` as people read them (issue 31): a header and the run's name; classes in the
dataset's words with the WordNet id after them; epochs counted from 1. The JSON keeps its keys and values, and
adds `epoch_number` (from 1) beside `epoch`."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from dlguide_core.cli.main import main
from dlguide_core.jobs.store import JobStore


def _finished_job(store: JobStore, data: Path, name: str | None) -> str:
    job = store.create("cifar_net", "pytorch", {"data": str(data), "epochs": 1}, name=name)
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, 2, 1, ("n01443537", "n01629819"))
    store.add_steps([(job.id, s, 0, 1.0, 0.001, 40.0, 1.0 + s, None) for s in (1, 2)])
    store.add_epoch(job.id, 0, {"train_loss": 1.0, "val_loss": 1.1, "top1": 50.0, "top5": 100.0,
                                "per_class": {"n01443537": 40.0, "n01629819": 60.0}})
    store.finish(job.id, "succeeded")
    return job.id


def test_jobs_list_has_a_header_and_the_name_and_show_names_the_classes(tmp_path: Path, capsys) -> None:
    data = tmp_path / "tiny"
    data.mkdir()
    (data / "words.txt").write_text("n01443537\tgoldfish, Carassius auratus\nn01629819\tEuropean fire salamander\n")
    store = JobStore()
    named, unnamed = _finished_job(store, data, "lr sweep 3"), _finished_job(store, data, None)
    assert main(["jobs", "list"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["ID", "RECIPE", "STATUS", "PROGRESS", "CREATED", "NAME"]
    by_id = {row.split()[0]: row for row in rows}
    assert by_id[named].split()[1:4] == ["cifar_net", "succeeded", "step"]  # the columns scripts read, in place
    assert by_id[named].endswith("  lr sweep 3") and by_id[unnamed].endswith("  -")
    assert main(["jobs", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {"id", "recipe", "status", "epoch", "step", "created", "config"} <= set(listed[0])
    assert [(r["epoch"], r["epoch_number"]) for r in listed] == [(0, 1), (0, 1)]  # the store's count, and people's

    assert main(["jobs", "show", named]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"goldfish \(n01443537\) +40.0 %", shown) and "European fire salamander (n01629819)" in shown
    assert "  epoch 1  train_loss 1.0000" in shown and "step 2/2  epoch 1  loss" in shown
    assert main(["jobs", "show", named, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["epochs"][0]["epoch"] == 0  # the JSON keeps the store's count (issue 31's contract)...
    # ...and says the text's beside it (issue 43: one numbering for people, the one every text uses)
    assert record["epochs"][0]["epoch_number"] == 1 and record["last_step"]["epoch_number"] == 1
    assert (record["last_step"]["step"], record["last_step"]["epoch"]) == (2, 0)
