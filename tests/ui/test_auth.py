"""ui/auth.py through the whole app (AppTest): with an [auth] section an anonymous visitor gets the sign-in page
whatever page is asked for; a signed-in one gets the pages and sees who they are. (tests/served/test_signin.py
signs in for real, in a browser, against a real provider, and asks for other pages' URLs: AppTest runs
app.py itself only on its first run, so URL tricks are the browser test's.)"""

from __future__ import annotations

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from tests.support.apptest import APP

AUTH = {"auth": {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "not a real secret",
                 "client_id": "dlguide", "client_secret": "s", "server_metadata_url":
                 "http://localhost:9400/.well-known/openid-configuration"}}


def app(user: dict, secrets: dict | None = AUTH) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets = dict(secrets or {})
    at.user = user
    return at


def titles(at: AppTest) -> list[str]:
    return [t.value for t in at.title]


def test_anonymous_visitors_get_only_the_sign_in_page() -> None:
    at = app({"is_logged_in": False}).run()
    assert titles(at) == ["Sign in to dlguide"]
    assert [b.label for b in at.button] == ["Sign in"]


def test_named_providers_get_a_button_each() -> None:
    shared = {k: v for k, v in AUTH["auth"].items() if k in ("redirect_uri", "cookie_secret")}
    secrets = {"auth": {**shared, "google": {"client_id": "g"}, "okta": {"client_id": "o"}}}
    at = app({"is_logged_in": False}, secrets).run()
    assert [b.label for b in at.button] == ["Sign in with google", "Sign in with okta"]


def test_a_signed_in_user_gets_the_pages_and_their_name() -> None:
    at = app({"is_logged_in": True, "email": "alice@example.org", "email_verified": True, "sub": "alice"}).run()
    assert "Classify with Inception v3" in titles(at)
    assert "Signed in as `oidc:alice@example.org`" in [c.value for c in at.sidebar.caption]  # issue 33, N5
    assert "Log out" in [b.label for b in at.sidebar.button]


def test_without_an_email_the_subject_names_the_user() -> None:
    at = app({"is_logged_in": True, "sub": "u-123", "iss": "https://idp.example"}).run()
    assert "Signed in as `oidc:https://idp.example#u-123`" in [c.value for c in at.sidebar.caption]  # issuer+subject


def test_without_an_auth_section_nobody_signs_in() -> None:
    at = app({"email": "test@example.com"}, secrets=None).run()
    assert "Classify with Inception v3" in titles(at)
    assert not [c for c in at.sidebar.caption if "Signed in" in c.value]
    assert "Log out" not in [b.label for b in at.sidebar.button]


def warning_app() -> None:
    from ui.auth import network_warning

    network_warning()


@pytest.mark.parametrize("address, secrets, warned", [
    ("0.0.0.0", None, True), ("192.0.2.1", None, True), ("0.0.0.0", AUTH, False), ("127.0.0.1", None, False),
])
def test_the_devices_page_warns_about_a_network_without_sign_in(address, secrets, warned) -> None:
    saved = config.get_option("server.address")
    config.set_option("server.address", address)
    try:
        at = AppTest.from_function(warning_app)
        at.secrets = dict(secrets or {})
        at.run()
    finally:
        config.set_option("server.address", saved)
    assert bool([w for w in at.warning if "with no sign-in" in w.value]) is warned


def test_the_booth_needs_no_sign_in(monkeypatch) -> None:
    """Booth mode with an [auth] section: an anonymous visitor gets the booth, never the sign-in page."""
    monkeypatch.setenv("DLGUIDE_KIOSK", "1")
    monkeypatch.setenv("DLGUIDE_KIOSK_BACKEND", "torch")
    at = app({"is_logged_in": False})
    at.default_timeout = 180
    at.run()
    assert not at.exception, at.exception
    assert titles(at) == ["What does the AI see?"]
    assert not [b for b in at.button if b.label.startswith("Sign in")]
