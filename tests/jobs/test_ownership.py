"""jobs.ownership: who may cancel, resume or delete a job, and the audit line each action leaves (issue 22)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from dlguide_core.jobs import queue
from dlguide_core.jobs.ownership import (
    Actor,
    NotJobOwner,
    admins,
    app_actor,
    audit,
    audit_line,
    authorize,
    cli_actor,
    os_user,
    refusal,
)
from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe

ALICE, BOB = "alice@example.org", "bob@example.org"


def job_owned_by(owner: str | None):
    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=1)
    return store.create("cifar_net", "pytorch", {**cfg.__dict__}, owner=owner)


def test_admins_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_ADMINS", " Carol@Example.org, ,root ")
    assert admins() == {"oidc:carol@example.org", "os:root"}  # plain names read in their namespace
    monkeypatch.delenv("DLGUIDE_ADMINS")
    assert admins() == frozenset()


@pytest.mark.parametrize("action", ["cancel", "resume", "delete"])
def test_with_sign_in_only_the_owner_or_an_admin_may_act(monkeypatch, action: str) -> None:
    monkeypatch.setenv("DLGUIDE_ADMINS", "carol@example.org")
    job = job_owned_by(ALICE)
    assert refusal(job, app_actor(ALICE, sign_in=True), action) is None
    assert refusal(job, app_actor("ALICE@example.org", sign_in=True), action) is None  # emails ignore case
    assert refusal(job, app_actor("carol@example.org", sign_in=True), action) is None
    reason = refusal(job, app_actor(BOB, sign_in=True), action)
    assert reason == (f"Job {job.id} belongs to oidc:{ALICE}: only they or an admin (DLGUIDE_ADMINS) may {action} it.")
    with pytest.raises(NotJobOwner, match="belongs to oidc:alice"):
        authorize(job, app_actor(BOB, sign_in=True), action)
    assert refusal(job, app_actor(None, sign_in=True), action) == f"Sign in to {action} jobs."


def test_without_sign_in_anyone_may_act() -> None:
    job = job_owned_by(ALICE)
    assert refusal(job, app_actor(None, sign_in=False), "delete") is None
    assert refusal(job, app_actor(BOB, sign_in=False), "delete") is None


def test_a_job_with_no_recorded_owner_is_the_admins_business(monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_ADMINS", "carol@example.org")
    old = job_owned_by(None)
    assert "no recorded owner" in refusal(old, app_actor(ALICE, sign_in=True), "cancel")
    assert refusal(old, app_actor("carol@example.org", sign_in=True), "cancel") is None


def test_the_cli_acts_as_the_os_user_and_enforces_once_admins_are_named(monkeypatch) -> None:
    monkeypatch.delenv("DLGUIDE_ADMINS", raising=False)
    assert cli_actor() == Actor(f"os:{os_user()}", False, enforced=False, via="cli")
    monkeypatch.setenv("DLGUIDE_ADMINS", "carol@example.org")
    assert cli_actor() == Actor(f"os:{os_user()}", False, enforced=True, via="cli")
    monkeypatch.setenv("DLGUIDE_ADMINS", f"carol@example.org,{os_user().upper()}")
    assert cli_actor().admin


def test_queued_jobs_record_their_owner() -> None:
    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=1)
    assert queue.submit(store, "cifar_net", cfg, start=False, owner=ALICE).owner == f"oidc:{ALICE}"
    assert queue.submit(store, "cifar_net", cfg, start=False).owner == f"os:{os_user()}"


def test_an_audit_line_is_one_line_in_the_log_and_the_audit_file(isolated_home) -> None:
    job = job_owned_by(ALICE)
    job.log_path.write_text("epoch 1\n")
    actor = app_actor("mallory\nfake line\x1b[31m", sign_in=False)
    line = audit(job, actor, "cancel")
    assert "\n" not in line and "\x1b" not in line
    assert f'"os:mallory?fake line?[31m" cancelled job {job.id} (owner "oidc:{ALICE}") via the app' in line
    assert job.log_path.read_text().splitlines() == ["epoch 1", line]
    assert (isolated_home / "audit.log").read_text().splitlines() == [line]


def test_a_deleted_jobs_audit_line_stays_in_the_audit_file(isolated_home) -> None:
    store = JobStore()
    job = job_owned_by(ALICE)
    store.finish(job.id, "failed", "out of memory")
    store.delete(job.id)
    line = audit(job, Actor("root", True, True, "cli"), "delete")
    assert line.endswith(f'"os:root" (admin) deleted job {job.id} (owner "oidc:{ALICE}") via the cli')
    assert not job.job_dir.exists()
    assert (isolated_home / "audit.log").read_text().splitlines() == [line]


def test_audit_line_format() -> None:
    job = dataclasses.replace(job_owned_by(None), id="20261124-120000-abcdef01")
    line = audit_line(job, Actor(None, False, False, "app"), "resume", when=0)
    assert line == ("1970-01-01T00:00:00Z audit: anonymous resumed job 20261124-120000-abcdef01 (owner unknown) "
                    "via the app")


def test_an_identity_is_quoted_so_a_subject_cannot_pose_as_an_admin() -> None:
    job = dataclasses.replace(job_owned_by('os:bob "x"'), id="20261124-120000-abcdef01")
    eve = app_actor("oidc:https://idp.example#eve (admin)", sign_in=True)
    line = audit_line(job, eve, "cancel", when=0)
    assert line == ('1970-01-01T00:00:00Z audit: "oidc:https://idp.example#eve (admin)" cancelled job '
                    '20261124-120000-abcdef01 (owner "os:bob \\"x\\"") via the app')
    admin = audit_line(job, dataclasses.replace(eve, name="oidc:https://idp.example#eve", admin=True), "cancel", when=0)
    assert '"oidc:https://idp.example#eve" (admin) cancelled' in admin


def test_oidc_subjects_compare_case_sensitively_emails_and_os_names_do_not(monkeypatch) -> None:
    job = job_owned_by("oidc:https://idp.example#Eve")
    assert refusal(job, app_actor("oidc:https://idp.example#Eve", sign_in=True), "cancel") is None
    assert "belongs to" in refusal(job, app_actor("oidc:https://idp.example#eve", sign_in=True), "cancel")
    assert "belongs to" in refusal(job, app_actor("oidc:https://IDP.example#Eve", sign_in=True), "cancel")
    monkeypatch.setenv("DLGUIDE_ADMINS", "oidc:https://idp.example#Root,Carol@Example.org")
    assert not app_actor("oidc:https://idp.example#root", sign_in=True).admin
    assert app_actor("oidc:https://idp.example#Root", sign_in=True).admin
    assert app_actor("oidc:carol@example.ORG", sign_in=True).admin


def test_a_refused_action_leaves_an_audit_line(isolated_home) -> None:
    job = job_owned_by(ALICE)
    job.log_path.write_text("epoch 1\n")
    with pytest.raises(NotJobOwner):
        authorize(job, app_actor(BOB, sign_in=True), "delete")
    with pytest.raises(NotJobOwner):
        authorize(job, app_actor(None, sign_in=True), "cancel")
    lines = (isolated_home / "audit.log").read_text().splitlines()
    assert [line.split(" audit: ")[1] for line in lines] == [
        f'"oidc:{BOB}" was refused: delete job {job.id} (owner "oidc:{ALICE}") via the app',
        f'anonymous was refused: cancel job {job.id} (owner "oidc:{ALICE}") via the app']
    assert job.log_path.read_text().splitlines()[1:] == lines


def test_the_app_without_sign_in_acts_as_the_os_user(isolated_home) -> None:
    actor = app_actor(None, sign_in=False)
    assert actor.name == f"os:{os_user()}" and not actor.enforced
    line = audit(job_owned_by(None), actor, "cancel")
    assert f'audit: "os:{os_user()}" cancelled job' in line and "anonymous" not in line


def test_unknown_actions_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="cancel, resume, delete, rename"):
        refusal(job_owned_by(ALICE), app_actor(ALICE, sign_in=True), "approve")


def test_os_user_without_a_passwd_entry(monkeypatch) -> None:
    def no_user():
        raise KeyError("getpwuid(): uid not found")

    monkeypatch.setattr("getpass.getuser", no_user)
    assert os_user() == f"uid {os.getuid()}"
