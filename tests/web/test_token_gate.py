"""The full app's token (web/token_gate.py, issue 33 N1): where it comes from, and what the gate lets through.
The served checks (a real `make run`, its websocket upgrade) are in tests/served/test_serving_hosts.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from tests.support.gated_app import gated_app
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


def test_weak_tokens_are_refused_naming_the_rule(tmp_path: Path, monkeypatch) -> None:
    """Issue 43, P6: 16 x "a" and a token with control characters were accepted."""
    for weak, rule in (("a" * 16, "different characters"), ("ab" * 20, "different characters"),
                       ("abcdefghijklmno\x01", "control characters"), ("abcdefgh-ijklmnop\x7f", "control"),
                       ("abcdefghijklmnopé", "ASCII")):
        monkeypatch.setenv("DLGUIDE_TOKEN", weak)
        with pytest.raises(TokenRefused, match=rule):
            load_token(tmp_path)
    monkeypatch.setenv("DLGUIDE_TOKEN", "Zq3-vR8_kP1mW7xT")  # 16 different: 64 bits by the count
    assert load_token(tmp_path).value == "Zq3-vR8_kP1mW7xT"


def test_an_unusable_token_place_is_one_line(tmp_path: Path, monkeypatch) -> None:
    """Issue 43, P6: a directory at server-token, or a DLGUIDE_HOME that cannot be made, gave a traceback."""
    monkeypatch.delenv("DLGUIDE_TOKEN", raising=False)
    (tmp_path / TOKEN_FILE).mkdir()
    with pytest.raises(TokenRefused, match="is a directory"):
        load_token(tmp_path)
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("DLGUIDE_HOME", str(tmp_path / "a-file" / "home"))
    with pytest.raises(TokenRefused, match="cannot keep the server's token in .*DLGUIDE_HOME"):
        load_token()


def test_servers_starting_on_one_fresh_home_share_one_token(tmp_path: Path, monkeypatch) -> None:
    """Issue 43, P6: two servers on a fresh home raced (FileExistsError, or two different tokens)."""
    import multiprocessing

    monkeypatch.delenv("DLGUIDE_TOKEN", raising=False)
    with multiprocessing.get_context("spawn").Pool(4) as pool:  # spawn: this process may hold Playwright's threads
        pool.map(time.sleep, [0.1] * 4)  # the workers started
        for round_ in range(8):
            home = tmp_path / f"home{round_}"
            home.mkdir()
            values = pool.map(token_in, [home] * 8, chunksize=1)
            assert len(set(values)) == 1 and (home / TOKEN_FILE).read_text().strip() == values[0]
            assert sorted(p.name for p in home.iterdir()) == [TOKEN_FILE]  # no draft left behind


def token_in(home: Path) -> str:
    return load_token(home).value


@pytest.fixture
def client() -> TestClient:
    app = gated_app(lambda request: f"app:{request.url.path}", ["GET", "PUT"])
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
