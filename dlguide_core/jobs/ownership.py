"""Who may act on a job, and the audit line each action leaves (issue 22).

Every job records its owner when it is queued, in a namespace (jobs.identity): `oidc:EMAIL` (a verified email)
or `oidc:ISSUER#SUBJECT` for someone signed in to the app, `os:NAME` for the OS user of the CLI and of an app served
without sign-in. When ownership is enforced, only the owner or an admin (DLGUIDE_ADMINS, comma-separated, read in
the same namespaces: `root` is `os:root`, `carol@example.org` is `oidc:carol@example.org`) may cancel, resume,
rename or delete a job; everyone may watch. A job with no recorded owner (made before owners were kept) stays
readable and only admins act on it.

Enforced in the app when sign-in is on (ui/auth.py). The CLI acts as the OS user and enforces when
DLGUIDE_ADMINS is set, the sign that a team shares this dlguide: someone else's job is then refused unless
the OS user is an admin. (A shell on the machine can reach the store anyway: in the CLI this guards against
mistakes, not against a hostile user; the served app is where the boundary holds.)

Each action performed, and each one refused, appends one line to the job's log and to DLGUIDE_HOME/audit.log (the
job's log goes with a deleted job; the audit file keeps the record); identities in it are quoted. The app served
without sign-in acts as the OS user that serves it.
"""

from __future__ import annotations

import getpass
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from dlguide_core import settings
from dlguide_core.jobs.identity import canonical, os_identity, qualified, same
from dlguide_core.jobs.job import Job, JobError, log_path

ACTIONS = {"cancel": "cancelled", "resume": "resumed", "delete": "deleted", "rename": "renamed"}
AUDIT_FILE = "audit.log"


class NotJobOwner(JobError):
    """An action on a job by someone who neither owns it nor is an admin."""


@dataclass(frozen=True)
class Actor:
    """Who asks for an action: `name` is an identity (`oidc:…` or `os:…`, jobs.identity; None: an anonymous visitor);
    `enforced` says whether ownership is checked for them; `via` is "app" or "cli" (for the audit line)."""

    name: str | None
    admin: bool
    enforced: bool
    via: str


def admins() -> frozenset[str]:
    """DLGUIDE_ADMINS as identities, as they compare (identity.canonical): `root` -> `os:root`, `Carol@x.org` ->
    `oidc:carol@x.org`, `oidc:https://idp#Eve` kept exactly (a subject's case matters)."""
    raw = os.environ.get("DLGUIDE_ADMINS", "")
    return frozenset(canonical(name) for name in raw.split(",") if name.strip())


def os_user() -> str:
    """The OS user running this process (the CLI's identity, and the owner of jobs queued without sign-in)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (a container's arbitrary uid) and no LOGNAME/USER
        return f"uid {os.getuid()}"


def app_actor(user: str | None, sign_in: bool) -> Actor:
    """A visitor of the app: `user` as signed in (an `oidc:` identity; None when signed out or sign-in is off). An
    app served without sign-in acts as the OS user that serves it (as its jobs are owned), never "anonymous"."""
    if user is None and not sign_in:
        user = os_identity(os_user())
    return Actor(user, bool(user and canonical(user) in admins()), enforced=sign_in, via="app")


def cli_actor() -> Actor:
    user, team = os_identity(os_user()), admins()
    return Actor(user, canonical(user) in team, enforced=bool(team), via="cli")


def refusal(job: Job, actor: Actor, action: str) -> str | None:
    """Why `actor` may not `action` `job`, in one line; None when they may."""
    if action not in ACTIONS:
        raise ValueError(f"unknown job action {action!r}: one of {', '.join(ACTIONS)}")
    if not actor.enforced or actor.admin:
        return None
    if not actor.name:
        return f"Sign in to {action} jobs."
    if job.owner is None:
        return f"Job {job.id} has no recorded owner: only an admin (DLGUIDE_ADMINS) may {action} it."
    if not same(job.owner, actor.name):
        return f"Job {job.id} belongs to {job.owner}: only they or an admin (DLGUIDE_ADMINS) may {action} it."
    return None


def authorize(job: Job, actor: Actor, action: str) -> None:
    """NotJobOwner (one line) unless `actor` may `action` `job`; a refusal leaves its audit line too."""
    if (reason := refusal(job, actor, action)) is not None:
        audit(job, actor, action, refused=True)
        raise NotJobOwner(reason)


def _clean(text: str | None) -> str:
    """One line whatever a claim holds: control characters (a newline in a subject) become '?'."""
    return "".join(c if c.isprintable() else "?" for c in (text or "anonymous"))[:200]


def _quoted(name: str | None) -> str:
    """An identity in double quotes (a `"` or `\\` in it escaped), so that whatever a subject holds (`eve (admin)`)
    reads as one name; `anonymous` (no identity) and `unknown` (no owner) are the only words left bare."""
    return json.dumps(_clean(name), ensure_ascii=False)


def audit_line(job: Job, actor: Actor, action: str, when: float | None = None, refused: bool = False) -> str:
    """`STAMP audit: "WHO" [(admin)] cancelled job ID (owner "OWNER") via the app`; a refused action reads
    `... "WHO" was refused: cancel job ID ...`."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if when is None else when))
    owner = _quoted(job.owner) if job.owner else "unknown"
    who = (_quoted(qualified(actor.name)) if actor.name else "anonymous") + (" (admin)" if actor.admin else "")
    what = f"was refused: {action}" if refused else ACTIONS[action]
    return f"{stamp} audit: {who} {what} job {job.id} (owner {owner}) via the {actor.via}"


def audit(job: Job, actor: Actor, action: str, refused: bool = False) -> str:
    """Append the action's line (done, or `refused`) to the job's log (when its folder is still there) and to the
    audit file."""
    line = audit_line(job, actor, action, refused=refused) + "\n"
    targets = [settings.home() / AUDIT_FILE]
    if log_path(job.id).parent.is_dir():
        targets.insert(0, log_path(job.id))
    for path in targets:
        _append(path, line)
    return line.rstrip("\n")


def _append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:  # one write of one short line: appends do not interleave
        out.write(line)
