"""Sign-in in a real browser against a real OpenID Connect provider (oidc-provider-mock on loopback, issue 22).

The served app's secrets.toml (with its [auth] section) lives in the test's folder, named by Streamlit's
`secrets.files` option on serve.py's command line: the repository's .streamlit/ is never written. Everything
says `localhost`, the host name the redirect URI and the provider's issuer name.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.support.oidc import HOST, oidc_provider, provider_command, sign_in, write_auth_secrets
from tests.support.ports import free_port
from tests.support.servers import start_served

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SIGN_IN_TITLE = "Sign in to dlguide"
NAV_LINKS = ("Classify", "Devices", "Train", "Compiled inference")


@pytest.fixture(scope="module")
def signed_app(tmp_path_factory):
    """A served app with sign-in on; yields its http://localhost:PORT URL."""
    if provider_command() is None:
        pytest.skip("oidc-provider-mock is not installed (requirements-dev.txt)")
    folder = tmp_path_factory.mktemp("signin")
    with oidc_provider(folder / "oidc.log") as provider:
        port = free_port()
        secrets = write_auth_secrets(folder / "secrets.toml", port, provider)
        # No ImageNet file: Classify stops at its download offer, after its title, with no model to load.
        env = {"DLGUIDE_HOME": str(folder / "home"), "TORCH_HOME": str(folder / "torch_home")}
        served = start_served(folder / "app.log", env, ("--no-warm", "--secrets.files", str(secrets)), port=port)
        try:
            yield f"http://{HOST}:{port}"
        finally:
            served.stop()


@pytest.fixture
def loopback_page(browser):
    """A page whose requests may reach loopback only (the provider's page names a stylesheet on a CDN)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})

    def only_loopback(route):
        host = urlsplit(route.request.url).hostname
        route.continue_() if host in (HOST, "127.0.0.1") else route.abort()

    context.route("**/*", only_loopback)
    page = context.new_page()
    page.set_default_timeout(90_000)
    yield page
    context.close()


def test_anonymous_visitor_sees_only_sign_in(signed_app: str, loopback_page) -> None:
    page = loopback_page
    for path in ("/", "/train?x=1"):
        page.goto(signed_app + path)
        page.get_by_text(SIGN_IN_TITLE).wait_for()
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        expect(page.locator("[data-testid=stSidebarNav]")).to_have_count(0)
        for hidden in ("Classify with Inception v3", "Install checks", "Signed in as"):
            expect(page.get_by_text(hidden)).to_have_count(0)


def test_sign_in_shows_the_pages_and_who_then_log_out(signed_app: str, loopback_page) -> None:
    page = loopback_page
    sign_in(page, signed_app, "alice@example.org")
    page.get_by_text("Classify with Inception v3").wait_for()
    sidebar = page.locator("[data-testid=stSidebar]")
    expect(sidebar.get_by_text("Signed in as")).to_contain_text("alice@example.org")
    for name in NAV_LINKS:
        expect(page.locator("[data-testid=stSidebarNav]").get_by_text(name, exact=True)).to_be_visible()

    sidebar.get_by_role("button", name="Log out").click()  # Streamlit forgets the user, then the provider's page
    page.get_by_role("button", name="End session").click()
    page.get_by_text(SIGN_IN_TITLE).wait_for()
    page.goto(signed_app + "/train")
    page.get_by_text(SIGN_IN_TITLE).wait_for()
    expect(page.get_by_text("Signed in as")).to_have_count(0)


def test_a_deep_link_shows_sign_in_alone_and_lands_on_its_page_after(signed_app: str, loopback_page, tmp_path) -> None:
    """Issue 31 (item 8): /train before sign-in showed "Page not found" over the sign-in page, whose button could
    not be pressed until the box was closed; after signing in, the visitor landed on Classify."""
    page = loopback_page
    page.goto(signed_app + "/train")
    page.get_by_text(SIGN_IN_TITLE).wait_for()
    page.wait_for_timeout(1000)  # the box came with the page's first run
    expect(page.get_by_text("Page not found")).to_have_count(0)
    page.screenshot(path=str(tmp_path / "signin-deep-link-train-1400x1000.png"))  # docs/screenshots/sign-in/
    page.get_by_role("button", name="Sign in").click()
    page.locator("input[name=sub]").fill("bob@example.org")
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(f"{signed_app}/train")
    page.get_by_role("heading", name="Train", exact=True).wait_for()
    expect(page.get_by_text("Page not found")).to_have_count(0)
