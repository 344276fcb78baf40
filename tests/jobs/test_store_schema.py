"""jobs.schema: versioned schema, v1 stores (written by the release before versions) upgraded intact."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from dlguide_core.errors import StoreError
from dlguide_core.jobs import schema
from dlguide_core.jobs.store import JobStore
from tests.support.v1_store import FIXTURE, JOBS


def _v1_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(FIXTURE, home)
    return home


def _v1_rows(db: Path) -> dict[str, list]:
    with sqlite3.connect(db) as conn:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in ("jobs", "steps", "epochs")}


def test_a_v1_store_upgrades_on_open_after_a_backup_and_keeps_every_row(tmp_path: Path, monkeypatch) -> None:
    home = _v1_home(tmp_path)
    monkeypatch.setenv("DLGUIDE_HOME", str(home))
    before = _v1_rows(home / "jobs.db")
    store = JobStore()
    assert store.schema_version == schema.SCHEMA_VERSION == 2
    assert _v1_rows(home / "jobs.db.bak-v1") == before  # the copy taken before the upgrade
    jobs = store.list_jobs(refresh=False)
    assert sorted((j.recipe, j.status) for j in jobs) == sorted((r[0], r[3]) for r in JOBS)
    for job in jobs:
        assert job.executor == "local" and job.owner is None and job.tags == () and job.skipped_files is None
        data = job.to_json()
        assert {"executor", "external_id", "owner", "host", "boot_id", "name", "tags", "skipped_files"} <= set(data)
    after = _v1_rows(home / "jobs.db")
    assert [r[:20] for r in after["jobs"]] == before["jobs"] and after["steps"] == before["steps"]
    assert after["epochs"] == before["epochs"]
    for job in jobs:
        if job.checkpoint:
            assert Path(job.checkpoint).name == "checkpoint.pt"
            assert (home / "jobs" / job.id / "checkpoint.pt").read_bytes() == f"checkpoint of {job.id}".encode()
            assert (home / "jobs" / job.id / "tensorboard").is_dir()
    store.close()
    assert JobStore().schema_version == 2  # a second open finds it current (no second backup needed)


def test_v2_columns_are_written_and_read_back() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, owner="ada", executor="slurm", name="first", tags=("a", "b"))
    assert (job.owner, job.executor, job.name, job.tags) == ("ada", "slurm", "first", ("a", "b"))
    store.set_external(job.id, "slurm", "4242")
    store.set_host(job.id, "node1", "boot-1")
    store.set_skipped_files(job.id, 3, ["a.jpg", "b.jpg"])
    job = store.rename(job.id, "second", ["c"])
    assert (job.external_id, job.host, job.boot_id, job.name, job.tags) == ("4242", "node1", "boot-1", "second",
                                                                            ("c",))
    assert job.to_json()["skipped_files"] == {"count": 3, "examples": ["a.jpg", "b.jpg"]}
    assert job.to_json()["tags"] == ["c"]


def test_a_store_newer_than_the_code_is_refused_and_left_untouched(tmp_path: Path) -> None:
    store = JobStore()
    store.create("cifar_net", "pytorch", {})
    with store._tx() as db:
        db.execute("INSERT INTO schema_version (version, applied) VALUES (?, ?)", (schema.SCHEMA_VERSION + 1, 0.0))
    store.close()
    before = store.path.read_bytes()
    with pytest.raises(StoreError, match=r"schema v3, newer than this dlguide's v2"):
        JobStore()
    assert store.path.read_bytes() == before and not list(store.path.parent.glob("*.bak-*"))
