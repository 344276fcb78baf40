"""Slow bodies and greedy clients (web/bodies.py, issue 43 P2, P5 and P7): a body is read on a deadline and at a
minimum rate before it takes a slot of the booth's route or of the upload route; one client address holds a few
slots and part of the upload budget. ASGI calls with a hand-driven `receive`, no server; the served check (32 slow
bodies against a real booth) is in tests/served/test_kiosk.py."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from tests.support.own_loop import run_in_own_loop
from web import booth_api
from web.bodies import BodyRefused, ClientSlots, read_body
from web.booth_api import BoothApi
from web.upload_caps import CappedUploads, SessionClients, UploadGate

MIB = 2**20


def trickle(chunks: int, every_s: float, size: int = 1):
    """A client sending `size` bytes every `every_s` seconds, `chunks` times (then the end of its body)."""
    sent = [0]

    async def receive():  # receive.sent[0]: the chunks handed over so far
        if sent[0]:
            await asyncio.sleep(every_s)
        sent[0] += 1
        return {"type": "http.request", "body": b"x" * size, "more_body": sent[0] < chunks}

    receive.sent = sent  # type: ignore[attr-defined]
    return receive


def whole(data: bytes):
    async def receive():
        return {"type": "http.request", "body": data, "more_body": False}

    return receive


def test_a_stalled_body_is_refused_at_its_rate_not_waited_on() -> None:
    async def go() -> None:
        stalled = trickle(100, 5.0)
        with pytest.raises(BodyRefused, match="too slowly") as refused:  # one byte every 5 s, as the attack sent
            await read_body(stalled, MIB, min_rate=1024, grace_s=0.5, deadline_s=60)
        # refused at its rate: before its second byte came, not after waiting for it
        assert refused.value.status == 408 and stalled.sent == [1]
        with pytest.raises(BodyRefused) as late:  # quick enough bytes, but never done: the deadline
            await read_body(trickle(10_000, 0.01, 4096), 2**30, min_rate=1, grace_s=0, deadline_s=0.5)
        assert late.value.status == 408
        with pytest.raises(BodyRefused) as big:
            await read_body(whole(b"x" * 11), 10)
        assert big.value.status == 413
        with pytest.raises(BodyRefused) as empty:
            await read_body(whole(b""), 10)
        assert empty.value.status == 400
        assert await read_body(trickle(5, 0.01, 1000), MIB, min_rate=1000, grace_s=0.5) == b"x" * 5000

    run_in_own_loop(go)


def test_one_client_address_works_on_a_few_requests_and_the_others_pass_it() -> None:
    async def go() -> None:
        slots = ClientSlots(per_client=2, pending=3)
        order: list[str] = []
        release = asyncio.Event()

        async def work(client: str, name: str) -> None:
            async with slots.turn(client):
                order.append(name)
                await release.wait()

        greedy = [asyncio.create_task(work("10.0.0.1", f"greedy{i}")) for i in range(5)]
        await asyncio.sleep(0.05)
        other = asyncio.create_task(work("10.0.0.2", "other"))
        await asyncio.sleep(0.05)
        assert order == ["greedy0", "greedy1", "other"]  # the third greedy one waits behind its own two
        release.set()
        await asyncio.gather(*greedy, other)
        assert slots.clients == {}  # an address with nothing under way holds nothing
        async with slots.receiving("a"), slots.receiving("a"), slots.receiving("a"):
            with pytest.raises(BodyRefused) as refused:
                async with slots.receiving("a"):
                    pass
            assert refused.value.status == 429
            async with slots.receiving("b"):
                pass

    run_in_own_loop(go)


def fake_served():
    raise AssertionError("the model is not asked for a refused request")


def booth_scope(route: str = "classify", query: bytes = b"name=a.jpg", client: str = "127.0.0.1") -> dict:
    return {"type": "http", "method": "POST", "path": f"/_booth/{route}", "query_string": query, "headers": [],
            "client": (client, 5000)}


async def call(app, scope: dict, receive) -> tuple[int, bytes]:
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_slow_bodies_on_the_booth_route_hold_no_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """P2: 32 sockets sending a byte every 5 s took every slot of the route (it took its slot, then read): a visitor
    waited 55 s. Now they hold none; each gets 408 at its rate, and the visitor beside them is answered at once."""
    monkeypatch.setattr(booth_api, "check_xsrf", lambda scope: None)
    monkeypatch.setenv("DLGUIDE_BODY_MIN_RATE", "4096")
    answered: list[bytes] = []

    def answer(self, route: str, data: bytes, query: dict[str, str]) -> tuple[bytes, str]:
        answered.append(data)
        return b'{"label": "ok"}', "application/json"

    monkeypatch.setattr(BoothApi, "answer", answer)

    async def go() -> None:
        app = BoothApi(None, inflight=4, max_bytes=MIB)
        slow = [asyncio.create_task(call(app, booth_scope(), trickle(100, 5.0))) for _ in range(32)]
        await asyncio.sleep(0.2)
        status, body = await call(app, booth_scope(), whole(b"photo"))
        # answered while every slow body still holds its connection (they get 408 only at BODY_GRACE_S, 5 s)
        assert (status, body) == (200, b'{"label": "ok"}') and answered == [b"photo"]
        assert not any(task.done() for task in slow)
        results = await asyncio.gather(*slow)
        assert {status for status, _ in results} == {408}
        assert "too slowly" in json.loads(results[0][1])["error"]

    run_in_own_loop(go)


def test_one_client_address_holds_a_few_of_the_booth_routes_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """P5: one client's photos made every other visitor wait 12-24 s per photo. Its requests now take at most
    DLGUIDE_CLIENT_SLOTS of the route's turns; a visitor from another address is answered beside them."""
    monkeypatch.setattr(booth_api, "check_xsrf", lambda scope: None)
    monkeypatch.setenv("DLGUIDE_CLIENT_SLOTS", "2")
    release = threading.Event()

    def answer(self, route: str, data: bytes, query: dict[str, str]) -> tuple[bytes, str]:
        if data == b"greedy":
            release.wait(timeout=60)  # the greedy client's photos take their time
        return data, "application/json"

    monkeypatch.setattr(BoothApi, "answer", answer)

    async def go() -> None:
        app = BoothApi(None, inflight=4, max_bytes=MIB)
        greedy = [asyncio.create_task(call(app, booth_scope(client="10.0.0.9"), whole(b"greedy"))) for _ in range(6)]
        await asyncio.sleep(0.2)
        try:
            visitor = await asyncio.wait_for(call(app, booth_scope(client="10.0.0.2"), whole(b"visitor")), 5)
            assert visitor == (200, b"visitor")
            assert sum(task.done() for task in greedy) == 0
        finally:
            release.set()
        assert [status for status, _ in await asyncio.gather(*greedy)] == [200] * 6

    run_in_own_loop(go)


def test_a_heat_map_index_is_ascii_digits_of_bounded_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """P7: `index=²` gave a 503 and a traceback, 5,000 digits too, and `index=١` was read as 1."""
    app = BoothApi(None, served=lambda: (None, None), max_bytes=MIB)  # type: ignore[arg-type,return-value]
    for index in ("²", "١", "1" * 5000, "", "-1", "1.0", " 1"):
        with pytest.raises(booth_api.ApiError, match="ASCII digits") as refused:
            app.answer("heatmap", b"photo", {"index": index})
        assert refused.value.status == 400, index


def upload_scope(session: str, client: str) -> dict:
    return {"type": "http", "method": "PUT", "path": f"/_stcore/upload_file/{session}/f", "headers": [],
            "client": (client, 5000)}


def test_slow_uploads_hold_no_turn_of_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """P2: 8 slow uploads from one session held every turn of the server's upload route: nobody could upload."""
    monkeypatch.setenv("DLGUIDE_BODY_MIN_RATE", "4096")
    stored: list[bytes] = []

    async def streamlit_route(scope, receive, send) -> None:  # reads the body it is given, as Streamlit's does
        message = await receive()
        stored.append(message["body"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def go() -> None:
        gate = UploadGate(streamlit_route, per_session=16, per_server=2)
        slow = [asyncio.create_task(call(gate, upload_scope("s1", "10.0.0.9"), trickle(100, 5.0)))
                for _ in range(8)]
        await asyncio.sleep(0.2)
        status, _ = await asyncio.wait_for(call(gate, upload_scope("s2", "10.0.0.2"), whole(b"photo")), 2)
        assert status == 204 and stored == [b"photo"]
        assert {status for status, _ in await asyncio.gather(*slow)} == {408}

    run_in_own_loop(go)


def test_one_client_address_holds_part_of_the_upload_budget() -> None:
    """P5: 11 anonymous sessions took 504 of the server's 512 MB; their address now holds at most its share."""
    clients = SessionClients()
    store = CappedUploads("/_stcore/upload_file", session_bytes=10 * MIB, server_bytes=100 * MIB,
                          client_bytes=25 * MIB, unclaimed_s=600, clients=clients)

    def upload(session: str, client: str, name: str) -> None:
        clients.seen(session, client)
        store.add_file(session, UploadedFileRec(file_id=name, name=name, type="image/jpeg", data=b"x" * 8 * MIB))

    for i in range(3):
        upload(f"greedy{i}", "10.0.0.9", "f")
    with pytest.raises(Exception, match="your address already holds 24 MB") as refused:
        upload("greedy3", "10.0.0.9", "f")
    assert getattr(refused.value, "status_code", None) == 429
    upload("visitor", "10.0.0.2", "f")  # another address still gets its turn
    store.remove_session_files("greedy0")
    upload("greedy3", "10.0.0.9", "f")
    assert clients.client("greedy0") is None
