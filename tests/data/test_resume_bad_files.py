"""`jobs resume` on a dataset that has gained unreadable files skips and counts them as a fresh run does
(issue 18, point 5): it finishes, and `jobs show --json` reports them under skipped_files."""

from __future__ import annotations

import json
import threading
import time

import pytest

from dlguide_core.cli.main import main
from dlguide_core.errors import StoreError
from dlguide_core.jobs.store import JobStore
from tests.support.toy_data import spoil, write_toy_dataset


def cancel_after_first_checkpoint(stop: threading.Event) -> None:
    """Cancel the one job as soon as it has saved a checkpoint (as a visitor's Cancel button would). The run has
    200 epochs of 2 steps, so the cancel lands long before its end even on a loaded machine (3 epochs once did not)."""
    store = JobStore()  # the test made the store: this is only a connection
    while not stop.is_set():
        try:
            jobs = store.list_jobs(refresh=False)
        except StoreError:  # busy for a moment on a loaded machine: look again
            continue
        if jobs and jobs[0].checkpoint_step:
            store.request_cancel(jobs[0].id)
            return
        time.sleep(0.01)


@pytest.mark.slow
def test_resume_on_a_dataset_with_bad_files_skips_and_counts_them(tmp_path, capsys):
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=4, val_per_class=1)
    JobStore()  # made here first: the canceller's store once lost a race with the run creating it (locked 30 s)
    stop = threading.Event()
    canceller = threading.Thread(target=cancel_after_first_checkpoint, args=(stop,))
    canceller.start()
    try:
        main(["train", "--recipe", "cifar_net", "--data", str(data), "--epochs", "200", "--workers", "0",
              "--device", "cpu", "--json"])
    finally:
        stop.set()
        canceller.join(timeout=30)
    job_id = json.loads(capsys.readouterr().out)["job_id"]
    assert main(["jobs", "show", job_id, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["status"] == "cancelled" and first["checkpoint_step"], first
    assert not (first.get("skipped_files") or {}).get("count")  # the dataset was clean then

    bad = spoil(data)  # a corrupt file, a dangling symlink and a decompression bomb appear
    assert main(["jobs", "resume", job_id]) == 0
    captured = capsys.readouterr()
    assert "skipped 3 unreadable file(s)" in captured.err
    assert main(["jobs", "show", job_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "succeeded" and shown["attempts"] == 2
    examples = shown["skipped_files"]["examples"]
    assert shown["skipped_files"]["count"] == 3 and len(examples) == 3
    assert all(any(str(path) in example for example in examples) for path in bad)
