"""The full app's token (web/token_gate.py, issue 33 N1): where it comes from, and what the gate lets through.
The served checks (a real `make run`, its websocket upgrade) are in tests/served/test_serving_hosts.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket, WebSocketDisconnect

from web.token_gate import TOKEN_FILE, TokenGate, TokenRefused, cookie_value, load_token

TOKEN = "a-test-token-of-enough-length-0123"
PORT = 8501


def test_a_token_file_is_made_private_and_reused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DLGUIDE_TOKEN", raising=False)
    first = load_token(tmp_path)
    path = tmp_path / TOKEN_FILE
    assert path.stat().st_mode & 0o777 == 0o600 and len(first.value) >= 40 and first.source == str(path)
    assert load_token(tmp_path).value == first.value  # a restart keeps bookmarks and cookies working


def test_a_token_file_others_can_read_is_replaced(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DLGUIDE_TOKEN", raising=False)
    path = tmp_path / TOKEN_FILE
    path.write_text("x" * 40)
    os.chmod(path, 0o644)
    again = load_token(tmp_path)
    assert again.value != "x" * 40 and path.stat().st_mode & 0o777 == 0o600


def test_dlguide_token_is_used_and_checked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_TOKEN", f" {TOKEN} ")
    assert load_token(tmp_path).value == TOKEN and not (tmp_path / TOKEN_FILE).exists()
    for weak in ("short", "has a space in the middle of it"):
        monkeypatch.setenv("DLGUIDE_TOKEN", weak)
        with pytest.raises(TokenRefused, match="DLGUIDE_TOKEN must be at least 16"):
            load_token(tmp_path)


async def echo(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text("in")
    await websocket.close()


@pytest.fixture
def client() -> TestClient:
    app = Starlette(routes=[Route("/{path:path}", lambda request: PlainTextResponse(f"app:{request.url.path}"),
                                  methods=["GET", "PUT"]),
                            WebSocketRoute("/_stcore/stream", echo)])
    return TestClient(TokenGate(app, token=TOKEN, port=PORT), base_url="http://127.0.0.1:8501",
                      follow_redirects=False)


def test_without_the_token_only_health_answers(client: TestClient) -> None:
    assert client.get("/_stcore/health").text == "app:/_stcore/health"
    for path in ("/", "/train", "/_stcore/health/../../train", "/?token=wrong"):
        answer = client.get(path)
        assert answer.status_code == 403 and TOKEN not in answer.text, path
    assert client.put("/_stcore/upload_file/s/f", content=b"x").status_code == 403
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/_stcore/stream"):
        pass


def test_the_token_link_sets_the_cookie_and_stays_on_this_server(client: TestClient) -> None:
    answer = client.get(f"http://127.0.0.1:8501//evil.example/train?a=1&token={TOKEN}")
    assert answer.status_code == 303 and answer.headers["location"] == "/evil.example/train?a=1"
    assert f"dlguide_token_{PORT}={cookie_value(TOKEN)}" in answer.headers["set-cookie"]
    assert TOKEN not in answer.headers["set-cookie"]
    assert client.get("/train").text == "app:/train"  # the cookie the redirect left
    cookie = answer.headers["set-cookie"].split(";")[0]
    with client.websocket_connect("/_stcore/stream", headers={"Cookie": cookie}) as socket:
        assert socket.receive_text() == "in"


def test_an_authorization_header_works_and_a_forged_cookie_does_not(client: TestClient) -> None:
    assert client.get("/", headers={"Authorization": f"token {TOKEN}"}).status_code == 200
    assert client.get("/", headers={"Cookie": f"dlguide_token_{PORT}={cookie_value('another')}"}).status_code == 403
    assert client.get("/", headers={"Cookie": f"dlguide_token_9999={cookie_value(TOKEN)}"}).status_code == 403
