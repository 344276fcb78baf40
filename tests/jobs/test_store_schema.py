"""jobs.schema: versioned schema, v1 stores (written by the release before versions) upgraded intact."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dlguide_core.errors import StoreError
from dlguide_core.jobs import schema
from dlguide_core.jobs.dialect import Postgres
from dlguide_core.jobs.store import JobStore
from tests.support.apptest import open_app
from tests.support.paths import ROOT
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
    assert store.schema_version == schema.SCHEMA_VERSION == 3
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
    assert JobStore().schema_version == 3  # a second open finds it current (no second backup needed)


def test_v2_columns_are_written_and_read_back() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, owner="ada", executor="slurm", name="first", tags=("a", "b"))
    assert (job.owner, job.executor, job.name, job.tags) == ("os:ada", "slurm", "first", ("a", "b"))  # its namespace
    store.set_external(job.id, "slurm", "4242")
    store.set_host(job.id, "node1", "boot-1")
    store.set_skipped_files(job.id, 3, ["a.jpg", "b.jpg"])
    job = store.rename(job.id, "second", ["c"])
    assert (job.external_id, job.host, job.boot_id, job.name, job.tags) == ("4242", "node1", "boot-1", "second",
                                                                            ("c",))
    assert job.to_json()["skipped_files"] == {"count": 3, "examples": ["a.jpg", "b.jpg"]}
    assert job.to_json()["tags"] == ["c"]


def test_a_store_newer_than_the_code_is_refused_and_left_untouched(tmp_path: Path, capsys) -> None:
    from dlguide_core.cli.main import main

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    with store.db.transaction() as db:
        db.execute("INSERT INTO schema_version (version, applied) VALUES (?, ?)", (schema.SCHEMA_VERSION + 1, 0.0))
    store.close()
    before = store.path.read_bytes()
    with pytest.raises(StoreError, match=r"schema v4, newer than this dlguide's v3"):
        JobStore()
    capsys.readouterr()
    for argv in (["jobs", "list"], ["jobs", "cancel", job.id], ["store", "upgrade"]):  # the CLI: one line, exit 2
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "newer than this dlguide's v3" in err, (argv, err)
    assert store.path.read_bytes() == before and not list(store.path.parent.glob("*.bak-*"))


def _cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlguide_core", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def _everything(store: JobStore) -> list:
    return [(j.to_json(), store.steps(j.id), store.epochs(j.id)) for j in store.list_jobs(refresh=False)]


def test_a_v1_store_copied_to_postgresql_keeps_every_job_and_a_second_copy_adds_nothing(
        tmp_path: Path, monkeypatch, postgres_server) -> None:
    home = _v1_home(tmp_path)
    monkeypatch.setenv("DLGUIDE_HOME", str(home))
    target = postgres_server.create_database()
    first = _cli("store", "copy", "--to", target)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"copied {len(JOBS)} jobs, 24 steps, 6 epochs")
    assert postgres_server.password not in first.stdout + first.stderr
    again = _cli("store", "copy", "--to", target)
    assert again.returncode == 0 and again.stdout.startswith("copied 0 jobs, 0 steps, 0 epochs")
    source, copy = JobStore(), JobStore(target)
    assert _everything(copy) == _everything(source) and len(_everything(copy)) == len(JOBS)
    for job in copy.list_jobs(refresh=False):
        if job.checkpoint:  # the paths are the v1 release's, unchanged; the files stay in the job folders
            assert job.checkpoint.endswith(f"/jobs/{job.id}/checkpoint.pt")
            assert list((home / "jobs" / job.id / "tensorboard").glob("events.out.tfevents.*"))


def test_an_old_postgresql_store_is_upgraded_only_by_the_command(postgres_server, monkeypatch) -> None:
    import psycopg

    url = postgres_server.create_database()
    with psycopg.connect(url, autocommit=True) as conn:  # the v1 tables, as the first release made them
        for statement in schema.V1:
            conn.execute(Postgres.translate(statement))
        conn.execute("INSERT INTO jobs (id, recipe, framework, config, status, created) "
                     "VALUES ('old-1', 'cifar_net', 'pytorch', '{}', 'succeeded', 1.0)")
    monkeypatch.setenv("DLGUIDE_STORE_URL", url)
    refused = _cli("jobs", "list")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "schema v1" in refused.stderr and "python -m dlguide_core store upgrade" in refused.stderr
    page = open_app("pages/train.py")  # the app says so too, in one line, and upgrades nothing
    assert not page.exception, page.exception
    shown = [e.value for e in page.error]
    assert len(shown) == 1 and "\n" not in shown[0].strip(), shown
    assert "schema v1" in shown[0] and "python -m dlguide_core store upgrade" in shown[0], shown
    assert postgres_server.password not in shown[0]
    assert json.loads(_cli("store", "info", "--json").stdout)["schema_version"] == 1
    upgraded = _cli("store", "upgrade")
    assert upgraded.returncode == 0 and "schema v3 (was v1)" in upgraded.stdout
    assert [j.id for j in JobStore().list_jobs(refresh=False)] == ["old-1"]
    page.run()  # the open page, once the store is upgraded: the job, no error, no restart
    assert not page.exception and not page.error, [e.value for e in page.error]
    assert list(page.dataframe[0].value["job"]) == ["old-1"]
    assert _cli("store", "upgrade").stdout.strip().endswith("(already current)")
