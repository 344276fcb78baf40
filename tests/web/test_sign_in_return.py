"""After signing in, the page asked for (web/sign_in_return.py, issue 31 item 8): Streamlit's auth routes stand in
as two redirects; the browser test with a real provider is tests/served/test_signin.py."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import RedirectResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from web.sign_in_return import ReturnAfterSignIn


def client() -> TestClient:
    app = Starlette(routes=[Route("/auth/login", lambda request: RedirectResponse("http://idp.test/authorize", 302)),
                            Route("/oauth2callback", lambda request: RedirectResponse("/", 302))])
    return TestClient(ReturnAfterSignIn(app), base_url="http://localhost:8501", follow_redirects=False)


def test_the_page_asked_for_is_where_the_callback_sends_the_visitor() -> None:
    browser = client()
    login = browser.get("/auth/login", headers={"Referer": "http://localhost:8501/train"})
    assert login.headers["location"] == "http://idp.test/authorize" and "dlguide_return=train" in login.headers[
        "set-cookie"] and "HttpOnly" in login.headers["set-cookie"]
    back = browser.get("/oauth2callback?code=x")
    assert back.status_code == 302 and back.headers["location"] == "/train"
    assert "Max-Age=0" in back.headers["set-cookie"]


def test_only_this_apps_own_pages_are_remembered() -> None:
    for referer in ("http://evil.test/train", "http://localhost:8501/a/b", "http://localhost:8501/x%2F..",
                    "http://localhost:8501/", ""):
        browser = client()
        browser.get("/auth/login", headers={"Referer": referer})
        assert browser.get("/oauth2callback").headers["location"] == "/", referer
    forged = client().get("/oauth2callback", headers={"Cookie": "dlguide_return=//evil.test"})
    assert forged.headers["location"] == "/"
