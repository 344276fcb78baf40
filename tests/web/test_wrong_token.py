"""Issue 43 (the walk): a wrong token showed the same page as no token. The 403 page now says that the token that
came (in the address, or a cookie of this port) is not this server's; with no token it asks for one, as before."""

from __future__ import annotations

from tests.support.own_loop import run_in_own_loop
from web.token_gate import TokenGate, cookie_name, new_token

PORT = 8501


async def _refused(gate: TokenGate, query: bytes = b"", headers: list | None = None) -> tuple[int, str]:
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def app(scope, receive, send_) -> None:  # never reached here
        raise AssertionError("let in")

    gate.app = app
    scope = {"type": "http", "method": "GET", "path": "/", "query_string": query, "headers": headers or []}
    await gate(scope, None, send)
    return sent[0]["status"], sent[1]["body"].decode()


def test_a_wrong_token_is_told_apart_from_no_token() -> None:
    token = new_token()
    gate = TokenGate(None, token, PORT)
    status, none = run_in_own_loop(lambda: _refused(gate))
    assert status == 403 and "asks for its token" in none and "not this server's" not in none
    status, wrong = run_in_own_loop(lambda: _refused(gate, b"token=" + new_token().encode()))
    assert status == 403 and "not this server's" in wrong and token not in wrong
    stale = [(b"cookie", cookie_name(PORT).encode() + b"=" + b"x" * 43)]
    status, by_cookie = run_in_own_loop(lambda: _refused(gate, headers=stale))
    assert status == 403 and "not this server's" in by_cookie
    other_port = [(b"cookie", cookie_name(PORT + 1).encode() + b"=x")]  # another server's cookie: no token here
    assert "not this server's" not in run_in_own_loop(lambda: _refused(gate, headers=other_port))[1]
