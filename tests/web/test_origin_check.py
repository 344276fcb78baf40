"""Requests from a page of another origin (web/origin_check.py, issue 43 P1): a page served by another local user on
127.0.0.1:8999 opened a full session of the owner's app on :8501 through the owner's browser, whose token cookie
travels to every port. The gate here is the stack's order: the Origin check, then the token gate. The served checks
(a real `make run`'s websocket, a real `make kiosk`'s route) are in tests/served/test_serving_hosts.py and
tests/served/test_kiosk.py."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from tests.support.gated_app import gated_app
from web.origin_check import OriginCheck, origin_of
from web.token_gate import TokenGate, cookie_name, cookie_value

TOKEN = "a-test-token-of-enough-length-0123"
PORT = 8501
WS = f"ws://127.0.0.1:{PORT}/_stcore/stream"  # the test client says Host: testserver unless told
COOKIE = {"Cookie": f"{cookie_name(PORT)}={cookie_value(TOKEN)}"}


@pytest.fixture
def client() -> TestClient:
    app = gated_app(lambda request: f"app:{request.method}", ["GET", "HEAD", "POST", "PUT"])
    stack = OriginCheck(TokenGate(app, token=TOKEN, port=PORT))
    return TestClient(stack, base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False)


def test_a_websocket_with_the_owners_cookie_from_another_port_is_refused(client: TestClient) -> None:
    for origin in ("http://127.0.0.1:8999", "http://localhost:8501", "https://127.0.0.1:8501", "null",
                   "http://127.0.0.1:8501.evil.example", "http://127.0.0.1"):
        with pytest.raises(WebSocketDisconnect), client.websocket_connect(
                WS, headers={**COOKIE, "Origin": origin}):
            pass
    with client.websocket_connect(WS, headers={**COOKIE, "Origin": "http://127.0.0.1:8501"}) as ws:
        assert ws.receive_text() == "in"  # the owner's own page


def test_writes_from_another_origin_are_refused_whatever_they_carry(client: TestClient) -> None:
    foreign = {"Origin": "http://127.0.0.1:8999"}
    assert client.post("/_booth/classify", headers={**COOKIE, **foreign}, content=b"x").status_code == 403
    assert client.put("/_stcore/upload_file/s/f", headers={**COOKIE, **foreign}, content=b"x").status_code == 403
    referer = {"Referer": "http://127.0.0.1:8999/attack.html"}  # no Origin: its Referer counts
    assert client.post("/x", headers={**COOKIE, **referer}, content=b"x").status_code == 403
    own = {"Origin": "http://127.0.0.1:8501"}
    assert client.post("/x", headers={**COOKIE, **own}, content=b"x").text == "app:POST"
    assert client.post("/x", headers={**COOKIE, "Referer": "http://127.0.0.1:8501/classify"}).text == "app:POST"
    # GET/HEAD are reads the token gate judges alone; a script with neither header is no browser's page
    assert client.get("/x", headers={**COOKIE, **foreign}).text == "app:GET"
    assert client.post("/x", headers=COOKIE, content=b"x").text == "app:POST"


def test_origins_compare_scheme_host_and_port_with_default_ports_filled_in() -> None:
    assert origin_of("http://Example.org") == ("http", "example.org", 80) == origin_of("http://example.org:80/a")
    assert origin_of("https://[::1]:8501/x?y") == ("https", "::1", 8501)
    for junk in ("null", "", "file:///etc/passwd", "//127.0.0.1:8501", "http://127.0.0.1:99999", "javascript:1"):
        assert origin_of(junk) is None, junk
