"""dlguide_core.jobs.logs: a job's log, read as its tail in whole lines."""

from __future__ import annotations

import time

from dlguide_core.jobs.logs import job_log, read_tail
from dlguide_core.jobs.store import JobStore


def test_a_jobs_log_is_read_from_its_file_and_empty_before_it_exists() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    assert job_log(job).empty
    job.log_path.write_text("step 1\nstep 2\n")
    log = job_log(job)
    assert log.text == "step 1\nstep 2\n" and log.size == 14 and not log.truncated
    assert log.source == str(job.log_path)


def test_a_long_log_is_cut_to_its_last_whole_lines(tmp_path) -> None:
    path = tmp_path / "job.log"
    path.write_bytes(b"".join(f"line {i}\n".encode() for i in range(1000)) + b"\xff bad byte\n")
    log = read_tail(path, max_bytes=100)
    assert log.truncated and log.size == path.stat().st_size
    assert log.text.endswith("line 999\n\ufffd bad byte\n")
    assert log.text.startswith("line ") and len(log.text.encode()) <= 100


def test_following_a_log_keeps_what_the_job_prints_after_the_store_says_it_ended(tmp_path, monkeypatch) -> None:
    """`jobs logs ID --follow`: the job records its ending in the store, then prints "job ID succeeded" (jobs.runner):
    the follow reads on after the ending until the log is quiet, so that last line is not lost."""
    from dlguide_core.jobs.executors import base
    from dlguide_core.jobs.executors.base import follow_file

    monkeypatch.setattr(base, "FOLLOW_SETTLE_MAX_S", 120.0)  # the cap a partial last line must not wait for

    path = tmp_path / "job.log"
    path.write_text("step 1\nstep 2\n")
    opened = []

    def path_of():
        opened.append(path)
        if len(opened) == 2:  # written after the ending was seen: the old follow had returned by then
            with path.open("a") as log:
                log.write("job X succeeded\npartial, no newline")
        return path

    started = time.monotonic()
    lines = list(follow_file(path_of, follow=True, poll_s=0.05, is_final=lambda: True, settle_s=0.3))
    assert lines == ["step 1", "step 2", "job X succeeded", "partial, no newline"]
    assert time.monotonic() - started < 60  # a last line with no newline does not hold the follow to its cap
