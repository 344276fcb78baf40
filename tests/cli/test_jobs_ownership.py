"""`jobs cancel|resume|delete` and job owners (issue 22): the CLI acts as the OS user; once DLGUIDE_ADMINS names a
team's admins, someone else's job is refused (exit 1, one line) unless the OS user is one of them. Every action
done leaves one audit line in the job's log and in DLGUIDE_HOME/audit.log."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.ownership import os_user
from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe
from tests.support.paths import ROOT

ALICE = "alice@example.org"


def make_job(owner: str | None, status: str = "queued") -> str:
    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=1)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__}, owner=owner)
    if status == "running":
        store.claim(job.id, os.getpid())  # this (alive) test process "runs" it
    elif status != "queued":
        store.finish(job.id, status, "stopped by the test")
    return job.id


def audit_lines(home) -> list[str]:
    path = home / "audit.log"
    return path.read_text().splitlines() if path.is_file() else []


@pytest.fixture
def team(monkeypatch):
    """Team mode: admins named, the OS user not among them."""
    monkeypatch.setenv("DLGUIDE_ADMINS", "carol@example.org")


@pytest.mark.parametrize("action, status", [("cancel", "running"), ("resume", "cancelled"), ("delete", "failed")])
def test_someone_elses_job_is_refused_in_team_mode(team, isolated_home, capsys, action: str, status: str) -> None:
    job_id = make_job(ALICE, status)
    assert main(["jobs", action, job_id, *(["--detach"] if action == "resume" else [])]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: Job {job_id} belongs to oidc:{ALICE}: only they or an admin (DLGUIDE_ADMINS) may "
                   f"{action} it."]
    job = JobStore().get(job_id)
    assert job.status == status and not job.cancel_requested  # nothing happened
    assert [line.split(" audit: ")[1] for line in audit_lines(isolated_home)] == [  # the refusal is recorded
        f'"os:{os_user()}" was refused: {action} job {job_id} (owner "oidc:{ALICE}") via the cli']


def test_a_job_with_no_owner_is_refused_in_team_mode_but_shown(team, capsys) -> None:
    job_id = make_job(None, "failed")
    assert main(["jobs", "delete", job_id]) == 1
    assert "no recorded owner" in capsys.readouterr().err
    assert main(["jobs", "show", job_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["owner"] is None


def test_own_jobs_and_admins_act_and_leave_an_audit_line(monkeypatch, isolated_home, capsys) -> None:
    monkeypatch.setenv("DLGUIDE_ADMINS", "carol@example.org")
    mine = make_job(os_user(), "running")
    assert main(["jobs", "cancel", mine]) == 0
    assert JobStore().get(mine).cancel_requested
    line = audit_lines(isolated_home)[-1]
    assert line.endswith(f'audit: "os:{os_user()}" cancelled job {mine} (owner "os:{os_user()}") via the cli')
    assert JobStore().get(mine).log_path.read_text().splitlines()[-1] == line

    monkeypatch.setenv("DLGUIDE_ADMINS", f"carol@example.org,{os_user()}")  # now an admin
    monkeypatch.setenv("DLGUIDE_MAX_JOBS", "1")  # `mine` holds the only slot: the resumed job stays queued
    theirs = make_job(ALICE, "interrupted")
    assert main(["jobs", "resume", theirs, "--detach"]) == 0
    assert JobStore().get(theirs).status == "queued"
    admin = f'"os:{os_user()}" (admin)'
    assert audit_lines(isolated_home)[-1].endswith(f'{admin} resumed job {theirs} (owner "oidc:{ALICE}") via the cli')
    assert main(["jobs", "cancel", theirs]) == 0
    assert main(["jobs", "delete", theirs]) == 0
    assert audit_lines(isolated_home)[-1].endswith(f'{admin} deleted job {theirs} (owner "oidc:{ALICE}") via the cli')
    assert len(audit_lines(isolated_home)) == 4


def test_without_admins_named_the_cli_acts_on_any_job(monkeypatch, isolated_home) -> None:
    monkeypatch.delenv("DLGUIDE_ADMINS", raising=False)
    job_id = make_job(ALICE, "failed")
    assert main(["jobs", "delete", job_id]) == 0
    assert audit_lines(isolated_home)[-1].endswith(
        f'"os:{os_user()}" deleted job {job_id} (owner "oidc:{ALICE}") via the cli')


def test_the_real_cli_refuses_with_one_line(team) -> None:
    job_id = make_job(ALICE, "failed")
    result = subprocess.run([sys.executable, "-m", "dlguide_core", "jobs", "delete", job_id], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: Job {job_id} belongs to oidc:{ALICE}: only they or an admin (DLGUIDE_ADMINS) may delete it."]
    assert JobStore().get(job_id).status == "failed"
