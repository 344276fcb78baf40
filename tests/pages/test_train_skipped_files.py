"""The Train page says which inputs a job skipped as unreadable (issue 18, point 5: `skipped_files`)."""

from __future__ import annotations

from dlguide_core.jobs.store import JobStore
from tests.support.apptest import open_app
from tests.support.jobs import finished_job


def _skipped_warnings(at) -> list[str]:
    return [w.value for w in at.warning if "unreadable file" in w.value]


def test_a_job_that_skipped_files_says_how_many_and_names_some(tmp_path) -> None:
    store = JobStore()
    clean = finished_job(store, tmp_path / "data", lr=0.01, top1=50.0, checkpoint=False)
    spoilt = finished_job(store, tmp_path / "data", lr=0.02, top1=40.0, checkpoint=False)
    examples = [f"{tmp_path}/data/train/a/corrupt{i}.jpg: cannot identify image file" for i in range(4)]
    store.set_skipped_files(spoilt, 7, examples)
    at = open_app("pages/train.py")
    at.selectbox(key="train_action_job").set_value(spoilt).run()
    assert not at.exception
    [warning] = _skipped_warnings(at)
    assert warning.startswith("Skipped 7 unreadable file(s), e.g. ")
    assert examples[0] in warning and examples[1] in warning and examples[2] not in warning  # two, not a wall
    at.selectbox(key="train_action_job").set_value(clean).run()
    assert not _skipped_warnings(at)  # a job that read every file says nothing about it
