"""N5 (issue 33): who a signed-in person is comes only from a verified email or the issuer + subject, in the `oidc:`
namespace, apart from the OS users (`os:`); plain names of older stores and of DLGUIDE_ADMINS are read by one rule."""

from __future__ import annotations

from dlguide_core.jobs.identity import oidc_identity, qualified
from dlguide_core.jobs.ownership import admins, app_actor, refusal
from dlguide_core.jobs.store import JobStore

ISSUER = "http://localhost:9400"


def test_only_a_verified_email_or_issuer_and_subject_names_someone() -> None:
    # oidc-provider-mock's form user: `email` equal to `sub`, no email_verified claim
    assert oidc_identity({"iss": ISSUER, "sub": "alice@example.org", "email": "alice@example.org"}) == \
        f"oidc:{ISSUER}#alice@example.org"
    assert oidc_identity({"iss": ISSUER, "sub": "u1", "email": "alice@example.org", "email_verified": False}) == \
        f"oidc:{ISSUER}#u1"
    assert oidc_identity({"iss": ISSUER, "sub": "u1", "email": "alice@example.org", "email_verified": True}) == \
        "oidc:alice@example.org"
    assert oidc_identity({"iss": ISSUER, "sub": "u1", "email": "a@x.org", "email_verified": "true"}) == "oidc:a@x.org"
    assert oidc_identity({"email": "alice@example.org"}) is None  # an unverified email alone names nobody
    assert oidc_identity({"sub": "root"}) is None


def test_plain_names_are_read_in_their_namespace() -> None:
    assert qualified("root") == "os:root" and qualified("alice@example.org") == "oidc:alice@example.org"
    assert qualified("oidc:x#root") == "oidc:x#root" and qualified("os:bob") == "os:bob"


def test_an_idp_subject_root_is_not_the_os_admin_root(monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_ADMINS", "root,carol@example.org")
    assert admins() == {"os:root", "oidc:carol@example.org"}
    job = JobStore().create("cifar_net", "pytorch", {}, owner="os:someone")
    idp_root = oidc_identity({"iss": ISSUER, "sub": "root", "email": "root"})
    assert not app_actor(idp_root, sign_in=True).admin and refusal(job, app_actor(idp_root, True), "delete")
    assert app_actor(oidc_identity({"iss": ISSUER, "sub": "c", "email": "carol@example.org",
                                    "email_verified": True}), True).admin


def test_an_older_stores_plain_owners_keep_their_jobs() -> None:
    store = JobStore()
    with store.db.transaction() as db:  # as a store written before the namespaces: plain names
        for owner in ("root", "alice@example.org"):
            db.execute("INSERT INTO jobs (id, recipe, framework, config, status, created, owner) "
                       "VALUES (?, 'cifar_net', 'pytorch', '{}', 'failed', 0, ?)", (f"old-{owner}", owner))
    assert store.get("old-root").owner == "os:root"  # the CLI's OS user keeps their job
    assert store.get("old-alice@example.org").owner == "oidc:alice@example.org"
    assert refusal(store.get("old-root"), app_actor("os:root", True), "delete") is None
    unverified = oidc_identity({"iss": ISSUER, "sub": "alice@example.org", "email": "alice@example.org"})
    assert refusal(store.get("old-alice@example.org"), app_actor(unverified, True), "delete")
