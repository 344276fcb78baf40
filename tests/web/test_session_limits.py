"""What one browser session may cost the served app (issue 33): control messages (web/control_messages.py, N2 and
N3) and uploads (web/upload_caps.py, N4). Streamlit's own message and upload types, no server: the policies are
what serve.py installs in front of Streamlit's Runtime and upload store."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from tests.support.own_loop import run_in_own_loop
from tests.support.waiting import wait_for
from web import control_messages
from web.control_messages import ControlPolicy
from web.upload_caps import CappedUploads, UploadGate

MIB = 2**20


class FakeRuntime:
    """Streamlit's Runtime as the websocket handler sees it: handle_backmsg(session_id, msg, client=...)."""

    def __init__(self) -> None:
        self.handled: list[tuple[str, BackMsg]] = []

        self.ended: list[str] = []

    def handle_backmsg(self, session_id: str, msg: BackMsg, *, client=None) -> None:
        self.handled.append((session_id, msg))

    def disconnect_session(self, session_id: str, *, client=None) -> None:
        self.ended.append(session_id)

    def close_session(self, session_id: str) -> None:
        self.ended.append(session_id)


def rerun(query: str, fragment: str = "") -> BackMsg:
    return BackMsg(rerun_script=ClientState(query_string=query, fragment_id=fragment))


def test_cache_clearing_and_developer_messages_are_dropped() -> None:
    """N2: `clear_cache` emptied every cached model for every visitor; a served app never acts on it."""
    runtime_class = type("Runtime", (FakeRuntime,), {})
    policy = control_messages.install(runtime_class)
    assert control_messages.install(runtime_class) is policy  # installed once
    runtime = runtime_class()
    for msg in (BackMsg(clear_cache=True), BackMsg(set_run_on_save=True), BackMsg(load_git_info=True)):
        runtime.handle_backmsg("s1", msg, client=None)
    runtime.handle_backmsg("s1", BackMsg(app_heartbeat=True), client=None)
    assert [m.WhichOneof("type") for _, m in runtime.handled] == ["app_heartbeat"] and policy.dropped == 3


def test_a_rerun_flood_runs_one_script_at_a_time_and_the_newest_state_still_arrives() -> None:
    """N3: 100 reruns at once from one session: the first runs, INTERRUPT_BURST may stop it, the rest wait for the
    run to end, and only the newest of them runs then; another session's runs are its own. A fragment's rerun
    held beside the page's becomes one run of the page (which runs every fragment) with the newest state."""
    delivered: list[tuple[str, str]] = []

    def deliver(msg: BackMsg):
        return lambda: delivered.append((msg.rerun_script.query_string, msg.rerun_script.fragment_id))

    async def flood() -> None:
        policy = ControlPolicy(burst=3, per_s=1.0, stuck_s=30.0)
        for i in range(100):
            msg = rerun(f"page={i}")
            policy.admit("s1", msg, deliver(msg))
        tick = rerun("tick", "fragment-a")
        policy.admit("s1", tick, deliver(tick))
        other = rerun("other")
        policy.admit("s2", other, deliver(other))
        assert [q for q, _ in delivered] == ["page=0", "page=1", "page=2", "page=3", "other"]
        policy.finished("s1")  # the script_finished the session sends its browser
        assert delivered[5:] == [("tick", "")]  # the newest state, as a run of the whole page
        policy.finished("s1")
        assert len(delivered) == 6 and policy.delivered == 6 and policy.held == 97 and policy.replaced == 96
        alone = rerun("alone", "fragment-b")  # a fragment's rerun held alone stays the fragment's
        policy.admit("s1", rerun("busy"), lambda: None)
        policy.admit("s1", alone, deliver(alone))
        policy.finished("s1")
        assert delivered[6:] == [("alone", "fragment-b")]

    run_in_own_loop(flood)


def test_reruns_with_unique_fragment_ids_hold_one_message_and_go_with_their_session() -> None:
    """Issue 43, P3: the budget kept the newest rerun per fragment id, which the client picks: 2,000 reruns x 64 KB
    with unique ids held 190 MB, still after the session closed. Now a session holds one, dropped when it goes."""
    runtime_class = type("Runtime", (FakeRuntime,), {})
    policy = control_messages.install(runtime_class, ControlPolicy(burst=0, per_s=0.0, stuck_s=30.0))
    runtime = runtime_class()
    padding = "x" * 64 * 1024

    async def flood() -> None:
        for i in range(2000):
            runtime.handle_backmsg("s1", rerun(f"{padding}{i}", f"fragment-{i}"), client=None)
        budget = policy.sessions["s1"]
        assert budget.held is not None and budget.held.msg.rerun_script.query_string.endswith("1999")
        assert len(runtime.handled) == 1 and policy.replaced == 1998
        runtime.disconnect_session("s1")
        assert "s1" not in policy.sessions  # nothing of it held: its timer cancelled, its message gone
        runtime.handle_backmsg("s2", rerun("a"), client=None)
        runtime.handle_backmsg("s2", rerun("b"), client=None)
        runtime.close_session("s2")
        assert policy.sessions == {} and runtime.ended == ["s1", "s2"]

    run_in_own_loop(flood)


def test_a_run_whose_end_is_never_seen_does_not_hold_the_session_for_ever() -> None:
    delivered: list[str] = []

    async def lost_finish() -> None:
        policy = ControlPolicy(burst=0, per_s=0.0, stuck_s=0.2)
        policy.admit("s1", rerun("first"), lambda: delivered.append("first"))
        policy.admit("s1", rerun("second"), lambda: delivered.append("second"))
        assert delivered == ["first"]
        for _ in range(100):
            if len(delivered) == 2:
                break
            await asyncio.sleep(0.1)

    run_in_own_loop(lost_finish)
    assert delivered == ["first", "second"]


def test_a_visitor_within_budget_is_never_held() -> None:
    """A run per click, each ending before the next click; and a few quick clicks during one run."""
    now = [0.0]
    policy = ControlPolicy(clock=lambda: now[0])
    delivered = []
    for i in range(200):
        now[0] = i * 0.3
        policy.admit("s1", rerun(str(i)), lambda i=i: delivered.append(i))
        policy.finished("s1")
    for i in range(3):  # three clicks while a run is under way: each stops it at once, as Streamlit's fastReruns
        policy.admit("s1", rerun(f"quick{i}"), lambda i=i: delivered.append(f"quick{i}"))
    assert delivered == [*range(200), "quick0", "quick1", "quick2"] and policy.held == 0


def record(session: str, file_id: str, size: int) -> tuple[str, UploadedFileRec]:
    return session, UploadedFileRec(file_id=file_id, name=f"{file_id}.jpg", type="image/jpeg", data=b"x" * size)


def test_uploads_are_capped_per_session_and_per_server() -> None:
    """N4: 40 x 24 MB from one booth visitor held about 1 GB; now a page holds at most its caps (429 past them)."""
    store = CappedUploads("/_stcore/upload_file", session_files=3, session_bytes=10 * MIB, server_bytes=16 * MIB,
                          unclaimed_s=600)
    for i in range(3):
        store.add_file(*record("s1", f"f{i}", MIB))
    with pytest.raises(HTTPException, match="already holds 3 uploads") as refused:
        store.add_file(*record("s1", "f3", MIB))
    assert refused.value.status_code == 429
    store.add_file(*record("s1", "f2", 2 * MIB))  # the same file again replaces itself
    store.add_file(*record("s2", "big", 9 * MIB))
    with pytest.raises(HTTPException, match="already holds 9 MB"):
        store.add_file(*record("s2", "bigger", 2 * MIB))
    store.add_file(*record("s3", "a", 2 * MIB))
    with pytest.raises(HTTPException, match="the server holds too many uploads"):
        store.add_file(*record("s3", "b", 2 * MIB))
    assert sum(len(f.data) for held in store.file_storage.values() for f in held.values()) == 15 * MIB
    assert store.refused == 3


def test_an_upload_no_run_reads_is_dropped() -> None:
    """N4: a file uploaded and never read by a script run (no widget took it) goes; one that a run read stays."""
    store = CappedUploads("/_stcore/upload_file", unclaimed_s=0.3)

    def upload() -> None:  # as the server's upload route would, but with no event loop in this thread: after the
        store.add_file(*record("s1", "unused", MIB))  # browser tests the main thread holds Playwright's loop,
        store.add_file(*record("s1", "used", MIB))  # which nobody runs here, so a call_later there never fires

    uploader = threading.Thread(target=upload)
    uploader.start()
    uploader.join()
    assert [f.file_id for f in store.get_files("s1", ["used"])] == ["used"]  # the uploader widget's read
    wait_for(lambda: store.dropped == 1, timeout=30)
    time.sleep(0.5)
    assert [f.file_id for f in store.get_files("s1", ["unused", "used"])] == ["used"] and store.dropped == 1


def test_an_upload_past_the_pages_count_is_refused_before_its_body() -> None:
    app = Starlette(routes=[Route("/{path:path}", lambda request: PlainTextResponse("stored"), methods=["PUT"])])
    gate = UploadGate(app, per_session=2, per_server=8)
    client = TestClient(gate)
    assert client.put("/_stcore/upload_file/s1/f1", content=b"x").text == "stored"
    gate.inflight["s1"] = 2  # two of this page's uploads under way
    assert client.put("/_stcore/upload_file/s1/f3", content=b"x").status_code == 429
    assert client.put("/_stcore/upload_file/s2/f1", content=b"x").text == "stored"
