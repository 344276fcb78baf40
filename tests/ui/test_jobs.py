"""ui/jobs.py and ui/job_view.py helpers: the ETA says "validating" between an epoch's last step and its row;
a run that Max steps ended says so; Resume is refused with a reason when it cannot work."""

from __future__ import annotations

import dataclasses

from dlguide_core.jobs.store import Job, JobSummary
from ui.job_view import resume_block, stop_note
from ui.jobs import eta_text, is_validating

BASE = Job(id="j", recipe="cifar_net", framework="pytorch", config={"epochs": 2, "max_steps": None},
           status="running", pid=1, slot=0, created=0.0, started=0.0, finished=None, error=None, checkpoint=None,
           checkpoint_step=None, total_steps=20, epochs=2, class_names=(), cancel_requested=False, attempts=1)


def _summary(step: int | None, epoch: int | None, eta: float | None = 5.0) -> JobSummary:
    return JobSummary("j", "cifar_net", "running", epoch, step, total_steps=20, images_per_s=None, eta_s=eta,
                      error=None)


def test_the_eta_says_validating_at_an_epochs_end_until_its_row_is_written() -> None:
    assert is_validating(BASE, _summary(10, 0), epoch_rows=0)
    assert not is_validating(BASE, _summary(10, 0), epoch_rows=1)  # epoch 1 validated: training again
    assert not is_validating(BASE, _summary(7, 0), epoch_rows=0)
    assert is_validating(BASE, _summary(20, 1), epoch_rows=1)  # the last step: the final validation
    assert eta_text(_summary(10, 0, 0.0), validating=True) == "validating"
    assert eta_text(_summary(7, 0, 65.0), validating=False) == "00:01:05"


def test_a_run_stopped_by_max_steps_says_where() -> None:
    done = dataclasses.replace(BASE, status="succeeded", config={"epochs": 2, "max_steps": 20})
    assert stop_note(done, _summary(20, 0)) == "stopped at max steps 20, in epoch 1 of 2"
    assert stop_note(dataclasses.replace(done, config={"epochs": 2, "max_steps": None}), _summary(20, 1)) == ""


def test_resume_is_refused_with_a_reason_without_a_checkpoint(tmp_path) -> None:
    failed = dataclasses.replace(BASE, status="failed")
    assert "No checkpoint" in resume_block(failed)
    checkpoint = tmp_path / "checkpoint.pt"
    checkpoint.write_bytes(b"x")
    assert resume_block(dataclasses.replace(failed, checkpoint=str(checkpoint))) == ""
    assert "succeeded job cannot be resumed" in resume_block(dataclasses.replace(BASE, status="succeeded"))
