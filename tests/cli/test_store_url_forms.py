"""Issue 43 P4: store URLs that are not URLs. A relative SQLite path means the submitter's directory, for the jobs
it starts too (a detached job runs in the checkout); a libpq keyword string is never a file name and never shown
with its password; an upper-case `?PASSWORD=` is one line, not a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlguide_core.errors import StoreError
from dlguide_core.jobs.store import JobStore
from dlguide_core.jobs.store_url import absolute_environment, mask, store_url
from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_until_done

SECRET = "sekr1t"


def _cli(*argv: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlguide_core", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=180, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_a_detached_job_with_a_relative_store_url_writes_to_the_submitters_store(tmp_path: Path) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    name = f"walk-rel-{os.getpid()}.db"
    env = {"DLGUIDE_STORE_URL": name, "DLGUIDE_HOME": str(tmp_path / "home")}
    done = _cli("train", "--recipe", "cifar_net", "--data", str(data), "--epochs", "1", "--workers", "0",
                "--device", "cpu", "--detach", "--json", cwd=elsewhere, env=env)
    assert done.returncode == 0, done.stderr
    job_id = json.loads(done.stdout)["job_id"]
    try:
        job = wait_until_done(JobStore(elsewhere / name), job_id)
        assert job.status == "succeeded", job.error
    finally:
        stray = ROOT / name
        assert not stray.exists(), "the detached job opened a new store in the checkout"
    shown = _cli("jobs", "show", job_id, "--json", cwd=elsewhere, env=env)
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "succeeded", shown.stderr


def test_the_environment_gets_an_absolute_sqlite_path_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"DLGUIDE_STORE_URL": "jobs/rel.db"}
    absolute_environment(env)
    assert env["DLGUIDE_STORE_URL"] == f"sqlite://{tmp_path.resolve()}/jobs/rel.db"
    for kept in ("postgresql://u:p@db/x", "host=db password=x", ""):
        env = {"DLGUIDE_STORE_URL": kept}
        absolute_environment(env)
        assert env["DLGUIDE_STORE_URL"] == kept


@pytest.mark.parametrize("dsn", [f"host=127.0.0.1 port=5432 user=u password={SECRET} dbname=jobs",
                                 f"dbname=jobs password = '{SECRET} x'", f"/tmp/x.db password={SECRET}"])
def test_a_keyword_dsn_is_refused_in_one_line_without_its_password_and_makes_no_file(dsn: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError) as err:
        store_url(dsn)
    assert SECRET not in str(err.value) and "keyword" in str(err.value)
    for args in (("store", "info"), ("store", "info", "--json"), ("jobs", "list")):
        done = _cli(*args, cwd=tmp_path, env={"DLGUIDE_STORE_URL": dsn, "DLGUIDE_HOME": str(tmp_path / "home")})
        assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        assert SECRET not in done.stderr and "Traceback" not in done.stderr
    assert [p.name for p in tmp_path.iterdir()] in ([], ["home"])  # no file named after the string


def test_a_keyword_dsn_says_which_url_to_write_instead() -> None:
    with pytest.raises(StoreError) as err:
        store_url(f"host=db port=5433 user=u password={SECRET} dbname=jobs sslmode=require")
    assert "write it as postgresql://u:***@db:5433/jobs?sslmode=require" in str(err.value)


@pytest.mark.parametrize("query", [f"PASSWORD={SECRET}", f"Password={SECRET}", f"Foo=1&password={SECRET}"])
def test_an_upper_case_query_parameter_is_one_line_without_its_value(query: str, tmp_path: Path) -> None:
    url = f"postgresql://u@127.0.0.1:9/jobs?{query}"
    for args in (("store", "info"), ("jobs", "list")):
        done = _cli(*args, cwd=tmp_path, env={"DLGUIDE_STORE_URL": url, "DLGUIDE_HOME": str(tmp_path / "home")})
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert SECRET not in done.stderr and "Traceback" not in done.stderr
    assert SECRET not in mask(f"failed: {url}")


def test_a_job_process_gets_the_store_the_app_opened_not_a_path_relative_to_the_checkout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started with `streamlit run` (no CLI in between) launches jobs in the checkout: the job's own
    environment names the store the launching process resolved (jobs.queue.job_env)."""
    from dlguide_core.jobs.queue import job_env

    monkeypatch.chdir(tmp_path)
    job = JobStore(tmp_path / "x.db").create("cifar_net", "pytorch", {})
    env = job_env(job, {"DLGUIDE_STORE_URL": "rel.db", "PATH": os.environ.get("PATH", "")})
    assert env["DLGUIDE_STORE_URL"] == f"sqlite://{tmp_path.resolve()}/rel.db"
