"""Who someone is, in one of two namespaces that never meet: `os:NAME` (an OS user: the CLI, an app served without
sign-in) and `oidc:...` (someone signed in through OpenID Connect).

A signed-in person is named only by what their provider vouches for: a verified email (`email_verified` true)
gives `oidc:EMAIL`; otherwise the issuer and subject, `oidc:ISSUER#SUBJECT`. An unverified `email` claim names
nobody, and an IdP subject `root` is `oidc:…#root`, never the OS user `os:root`.

Names written before the namespaces existed (job owners in older stores, DLGUIDE_ADMINS entries) are plain; they
are read by one rule, without rewriting the store: a name with an `@` was an app user's email (`oidc:EMAIL`), any
other an OS user (`os:NAME`). So `root` in DLGUIDE_ADMINS is the OS user root, and the CLI user's jobs keep their
owner. Emails and OS user names compare without case; an issuer and subject compare exactly (`canonical`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OS, OIDC = "os:", "oidc:"


def qualified(name: str) -> str:
    """`name` in its namespace: kept when it has one, else read by the rule above."""
    name = name.strip()
    if name.lower().startswith((OS, OIDC)):
        return name
    return (OIDC if "@" in name else OS) + name


def canonical(name: str) -> str:
    """`name` as identities are compared: its namespace in lower case; an email (`oidc:EMAIL`) and an OS user name in
    lower case too (as the CLI always read them); an `oidc:ISSUER#SUBJECT` exactly as written, since OpenID Connect
    compares issuers and subjects case-sensitively (`Eve` and `eve` are two people)."""
    name = qualified(name)
    prefix, rest = (OS, name[len(OS):]) if name.lower().startswith(OS) else (OIDC, name[len(OIDC):])
    return prefix + (rest if prefix == OIDC and "#" in rest else rest.lower())


def same(a: str, b: str) -> bool:
    """Whether two identities (qualified or plain) name the same person."""
    return canonical(a) == canonical(b)


def os_identity(user: str) -> str:
    return OS + user


def oidc_identity(claims: Mapping[str, Any]) -> str | None:
    """The signed-in person named by their ID token's claims: a verified email, else issuer + subject; None when
    the claims name nobody (no verified email, no issuer or subject)."""
    email, verified = claims.get("email"), claims.get("email_verified")
    if email and (verified is True or str(verified).lower() == "true"):
        return f"{OIDC}{email}"
    issuer, subject = claims.get("iss"), claims.get("sub")
    if issuer and subject:
        return f"{OIDC}{issuer}#{subject}"
    return None
