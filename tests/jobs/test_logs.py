"""dlguide_core.jobs.logs: a job's log, read as its tail in whole lines."""

from __future__ import annotations

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
