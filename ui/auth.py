"""Sign-in (issue 22): when Streamlit's secrets have an [auth] section, every page but the booth asks the visitor
to sign in with OpenID Connect (st.login; Authlib and httpx do the protocol). app.py routes an anonymous visitor
to `sign_in_page` (and the public booth) only; a signed-in one sees who they are in the sidebar, with a log-out
button. Job actions go through `act_on_job`: with sign-in on, only a job's owner or an admin may cancel, resume
or delete it (dlguide_core.jobs.ownership), and each action done leaves an audit line.

The served app's secrets are Streamlit's own: .streamlit/secrets.toml, or the files `secrets.files` names
(STREAMLIT_SECRETS_FILES). serve.py reads the same to warn when it serves a network with no sign-in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import streamlit as st

if TYPE_CHECKING:
    from dlguide_core.jobs.job import Job
    from dlguide_core.jobs.ownership import Actor

T = TypeVar("T")


def sign_in_configured() -> bool:
    """True when the secrets have an [auth] section (a missing or unreadable secrets file: no sign-in)."""
    return st.secrets.load_if_toml_exists() and "auth" in st.secrets


def signed_in() -> bool:
    return bool(st.user.get("is_logged_in"))  # absent when no [auth] section: signed out


def current_user() -> str | None:
    """Who is signed in, as job owners are recorded (jobs.identity): `oidc:EMAIL` for a verified email, else
    `oidc:ISSUER#SUBJECT`; None when signed out."""
    from dlguide_core.jobs.identity import oidc_identity

    if not signed_in():
        return None
    return oidc_identity(st.user.to_dict())


def providers() -> list[str | None]:
    """The configured identity providers: [None] for one unnamed provider ([auth] holds client_id), else the
    names of the [auth.NAME] tables."""
    auth = st.secrets["auth"]
    if "client_id" in auth:
        return [None]
    return [name for name, value in auth.items() if isinstance(value, Mapping)] or [None]


def sign_in_page() -> None:
    """The only page an anonymous visitor gets while sign-in is on (the booth excepted)."""
    st.title("Sign in to dlguide")
    st.write("This dlguide is shared by a team: sign in to classify, train and watch jobs.")
    for provider in providers():
        label = "Sign in" if provider is None else f"Sign in with {provider}"
        st.button(label, key=f"auth_sign_in_{provider or 'default'}", type="primary", icon=":material/login:",
                  on_click=st.login, args=() if provider is None else (provider,))


def sidebar_identity() -> None:
    """Who is signed in and a log-out button, in the sidebar (nothing when sign-in is off)."""
    user = current_user()
    if user is None:
        return
    shown = user.replace("`", "'")  # an identity is the provider's text: shown as code, never Markdown
    st.sidebar.caption(f"Signed in as `{shown}`")
    st.sidebar.button("Log out", key="auth_log_out", icon=":material/logout:", on_click=st.logout)


def network_warning() -> None:
    """On the Devices page: the app listens beyond this machine and nobody has to sign in."""
    from dlguide_core.network import is_loopback

    address = st.get_option("server.address") or ""
    if not is_loopback(address) and not sign_in_configured():
        st.warning(f"This app is served to a network (address `{address or 'every interface'}`) with no "
                   f"sign-in: anyone who reaches it can use every page. Add an `[auth]` section to "
                   f"`.streamlit/secrets.toml` (README: Serving to a team).", icon=":material/lock_open:")


def job_actor() -> Actor:
    """This visitor as jobs.ownership sees them: ownership is enforced while sign-in is on."""
    from dlguide_core.jobs.ownership import app_actor

    return app_actor(current_user(), sign_in_configured())


def act_on_job(job: Job, action: str, do: Callable[[], T]) -> T:
    """Run `do()` (the cancel, resume or delete of `job`) if this visitor may, then write the audit line;
    NotJobOwner (a DlguideError: the page's st.error shows its one line) if they may not."""
    from dlguide_core.jobs.ownership import audit, authorize

    actor = job_actor()
    authorize(job, actor, action)
    result = do()
    audit(job, actor, action)
    return result
