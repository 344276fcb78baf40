"""The Train page's job actions with sign-in on (issue 22, AppTest): everyone signed in sees every job; only its
owner or an admin (DLGUIDE_ADMINS) may cancel, resume or delete it, and each action done leaves an audit line."""

from __future__ import annotations

import os

import pytest
from streamlit.testing.v1 import AppTest

from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe
from tests.support.apptest import APP
from tests.support.toy_data import write_toy_dataset

ALICE, BOB, CAROL = "alice@example.org", "bob@example.org", "carol@example.org"
ISSUER = "http://localhost:9400"
AUTH = {"auth": {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "not a real secret",
                 "client_id": "dlguide", "client_secret": "s",
                 "server_metadata_url": "http://localhost:9400/.well-known/openid-configuration"}}


def make_job(owner: str | None, status: str) -> str:
    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=1)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__}, owner=owner)
    if status == "running":
        store.claim(job.id, os.getpid())
    else:
        store.finish(job.id, status, "stopped by the test")
    return job.id


def train_page_as(user: str, verified: bool = True) -> AppTest:
    """The Train page signed in as `user`, an email the provider verified (else only its issuer and subject count)."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets = AUTH
    at.user = {"is_logged_in": True, "email": user, "email_verified": verified, "iss": ISSUER,
               "sub": user.split("@")[0]}
    at.run()
    at.switch_page("pages/train.py").run()
    assert not at.exception, at.exception
    return at


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


@pytest.fixture(autouse=True)
def admins(monkeypatch):
    monkeypatch.setenv("DLGUIDE_ADMINS", CAROL)


def test_someone_else_sees_the_job_but_cannot_delete_it(isolated_home) -> None:
    job_id = make_job(ALICE, "failed")
    at = train_page_as(BOB)
    assert list(at.dataframe[0].value["job"]) == [job_id]  # watching is everyone's
    at.button(key="train_delete").click().run()
    at.button(key="train_delete_confirm").click().run()  # Delete asks first (issue 24)
    assert f"Job {job_id} belongs to oidc:{ALICE}: only they or an admin (DLGUIDE_ADMINS) may delete it." in errors(at)
    assert JobStore().get(job_id).status == "failed"
    assert (isolated_home / "audit.log").read_text().strip().endswith(  # the refusal is recorded
        f'audit: "oidc:{BOB}" was refused: delete job {job_id} (owner "oidc:{ALICE}") via the app')


def test_someone_else_cannot_cancel_a_running_job() -> None:
    job_id = make_job(ALICE, "running")
    at = train_page_as(BOB)
    at.button(key="train_cancel").click().run()
    assert "belongs to oidc:alice@example.org" in " ".join(errors(at))
    assert not JobStore().get(job_id).cancel_requested


def test_the_owner_cancels_and_the_log_says_who(isolated_home) -> None:
    job_id = make_job(ALICE, "running")
    at = train_page_as(ALICE)
    at.button(key="train_cancel").click().run()
    assert not errors(at)
    job = JobStore().get(job_id)
    assert job.cancel_requested
    line = job.log_path.read_text().splitlines()[-1]
    assert line.endswith(f'audit: "oidc:{ALICE}" cancelled job {job_id} (owner "oidc:{ALICE}") via the app')
    assert (isolated_home / "audit.log").read_text().splitlines() == [line]


def test_an_admin_deletes_anyones_job_even_one_with_no_owner(isolated_home) -> None:
    job_id = make_job(None, "cancelled")
    at = train_page_as(CAROL)
    at.button(key="train_delete").click().run()
    at.button(key="train_delete_confirm").click().run()
    assert not errors(at)
    assert JobStore().list_jobs() == []
    assert (isolated_home / "audit.log").read_text().strip().endswith(
        f'audit: "oidc:{CAROL}" (admin) deleted job {job_id} (owner unknown) via the app')


def test_a_job_started_in_the_app_belongs_to_the_signed_in_user(tmp_path, monkeypatch) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=4, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    monkeypatch.setenv("DLGUIDE_MAX_JOBS", "1")
    busy = make_job(CAROL, "running")  # holds the only slot: the new job stays queued, no process starts
    at = train_page_as(ALICE)
    at.selectbox(key="train_recipe").select("cifar_net").run()
    at.button(key="train_cifar_net_start").click().run()
    assert not at.exception, at.exception
    (job,) = [j for j in JobStore().list_jobs() if j.id != busy]
    assert (job.owner, job.status) == (f"oidc:{ALICE}", "queued")


def test_an_unverified_email_names_nobody_but_its_issuer_and_subject(isolated_home, monkeypatch) -> None:
    """N5: an IdP user whose `alice@…` email is not verified is `oidc:ISSUER#alice`, not alice, and an IdP subject
    `root` is not the OS user root that DLGUIDE_ADMINS names."""
    job_id = make_job(ALICE, "running")
    at = train_page_as(ALICE, verified=False)
    at.button(key="train_cancel").click().run()
    assert f"Job {job_id} belongs to oidc:{ALICE}: only they or an admin (DLGUIDE_ADMINS) may cancel it." in errors(at)
    assert not JobStore().get(job_id).cancel_requested
    monkeypatch.setenv("DLGUIDE_ADMINS", "root")  # the OS user root
    at = train_page_as("root", verified=False)
    at.button(key="train_cancel").click().run()
    assert "belongs to oidc:" in " ".join(errors(at)) and not JobStore().get(job_id).cancel_requested
    refused = (isolated_home / "audit.log").read_text().splitlines()
    assert len(refused) == 2 and all(" was refused: cancel job " in line for line in refused)


def test_renaming_is_the_owners_and_leaves_an_audit_line(isolated_home) -> None:
    """N6: someone else's Save is refused; the owner's rename is written and audited."""
    job_id = make_job(ALICE, "failed")
    at = train_page_as(BOB)
    at.text_input(key=f"train_name_{job_id}").input("[click me](https://evil.example)").run()
    at.button(key=f"train_rename_{job_id}").click().run()
    assert f"Job {job_id} belongs to oidc:{ALICE}: only they or an admin (DLGUIDE_ADMINS) may rename it." in errors(at)
    assert JobStore().get(job_id).name is None
    assert " was refused: rename job " in (isolated_home / "audit.log").read_text()
    at = train_page_as(ALICE)
    at.text_input(key=f"train_name_{job_id}").input("first try").run()
    at.button(key=f"train_rename_{job_id}").click().run()
    assert not [e for e in errors(at) if "belongs to" in e]  # only the job's own failure is shown, no refusal
    assert "stopped by the test" in errors(at) and JobStore().get(job_id).name == "first try"
    assert (isolated_home / "audit.log").read_text().strip().endswith(
        f'audit: "oidc:{ALICE}" renamed job {job_id} (owner "oidc:{ALICE}") via the app')
