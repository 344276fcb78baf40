"""Issue 33: one `jobs` row whose JSON is damaged never hides the other jobs. `jobs list` (and --json) lists the
others and names the bad one in one stderr line; `jobs show` of another job works and of the bad one is one line;
`jobs delete` removes it; the queue fails it instead of claiming it forever; the Train page warns in one line."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from dlguide_core.cli.main import main
from dlguide_core.jobs import queue
from dlguide_core.jobs.store import JobStore
from tests.support.apptest import APP


def _store_with_a_damaged_row(column: str = "config", status: str = "failed") -> tuple[JobStore, str, str]:
    store = JobStore()
    good = store.create("cifar_net", "pytorch", {"epochs": 1}, name="good")
    bad = store.create("cifar_net", "pytorch", {"epochs": 1}, name="bad")
    for job in (good, bad):
        store.finish(job.id, status, "stopped by the test") if status != "queued" else None
    with store.db.transaction() as db:
        db.execute(f"UPDATE jobs SET {column} = '{{not json' WHERE id = ?", (bad.id,))
    return store, good.id, bad.id


def test_jobs_list_and_show_go_on_beside_a_damaged_row(capsys) -> None:
    _, good, bad = _store_with_a_damaged_row()
    assert main(["jobs", "list"]) == 0
    out, err = capsys.readouterr()
    assert good in out and bad not in out
    assert err.splitlines() == [f"warning: job {bad} cannot be read: its config is not a JSON dict (the row was "
                                "written by hand or damaged); `jobs delete` removes it"]
    assert main(["jobs", "list", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [r["id"] for r in json.loads(out)] == [good] and bad in err and err.count("\n") == 1
    assert main(["jobs", "show", good]) == 0 and capsys.readouterr().out.startswith(good)
    assert main(["jobs", "show", bad]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and f"job {bad} cannot be read" in err and "Traceback" not in err
    assert main(["jobs", "delete", bad]) == 0
    assert [j.id for j in JobStore().list_jobs()] == [good] and JobStore().unreadable_jobs() == []


def test_every_json_column_is_checked(capsys) -> None:
    for column in ("class_names", "tags", "skipped_files"):
        store, good, bad = _store_with_a_damaged_row(column)
        assert main(["jobs", "list"]) == 0
        out, err = capsys.readouterr()
        assert good in out and f"its {column} is not a JSON" in err
        store.delete(bad)


def test_a_damaged_queued_row_fails_instead_of_blocking_the_queue(monkeypatch) -> None:
    store, good, bad = _store_with_a_damaged_row(status="queued")
    monkeypatch.setattr(queue, "launch", lambda store, job: None)  # no process: only the claim is under test
    started = queue.dispatch(store, lambda: 4)
    assert started == [good]
    (row,) = store.db.rows("SELECT status, error FROM jobs WHERE id = ?", (bad,))
    assert row["status"] == "failed" and "not JSON" in row["error"]


def test_the_train_page_names_the_damaged_row_and_lists_the_others() -> None:
    _, good, bad = _store_with_a_damaged_row()
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("pages/train.py").run()
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value["job"]) == [good]
    assert [w.value for w in at.warning if bad in w.value] == [
        f"job {bad} cannot be read: its config is not a JSON dict (the row was written by hand or damaged); "
        "`jobs delete` removes it"]
