"""Uploads held by the served app are bounded (issue 33, N4).

Streamlit 1.67 keeps every uploaded file in memory until its widget lets it go or its session ends, 120 s after
the tab closes (server.disconnectedSessionTTL). A booth visitor uploaded 40 x 24 MB in about 6 s without using
any: about 1 GB of RSS per round, until the timeout. Here:
- a session holds at most SESSION_FILES files and SESSION_BYTES bytes, the server SERVER_BYTES: an upload past
  a cap gets 429 and a one-line reason (the uploader shows it), and holds nothing;
- a file no script run has read within UNCLAIMED_S of its upload (Streamlit's uploader reads it on the rerun
  that follows at once) is dropped: an upload made only to take memory does not stay;
- one client address (all its sessions) holds at most DLGUIDE_CLIENT_UPLOAD_MB of uploads (issue 43, P5: 11
  anonymous sessions took 504 of the 512 MB);
- an upload's body is read first (web.bodies: a deadline and a minimum rate, holding no turn; a stalled one gets
  408), then at most INFLIGHT_SERVER uploads are handed to Streamlit at once, and at most DLGUIDE_CLIENT_SLOTS of one
  client address (`UploadGate`, in front of Streamlit's routes; issue 43, P2: 8 slow uploads from one session had
  held every turn of the server).
serve.py puts `CappedUploads` in place of Streamlit's MemoryUploadedFileManager and `UploadGate` in its middleware.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence

from starlette.exceptions import HTTPException
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from dlguide_core import settings
from web.bodies import BodyRefused, ClientSlots, read_body, refuse

MIB = 2**20
SESSION_FILES = 16  # Classify takes several photos at once
SESSION_BYTES = 64 * MIB
SERVER_BYTES = 512 * MIB
UNCLAIMED_S = 60.0
INFLIGHT_SERVER = 8


class SessionClients:
    """Which client address each session's uploads came from (UploadGate sees the address, the store the session):
    the store's cap per client address counts every session of that address."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.of: dict[str, str] = {}

    def seen(self, session_id: str, client: str) -> None:
        with self._lock:
            self.of[session_id] = client

    def client(self, session_id: str) -> str | None:
        with self._lock:
            return self.of.get(session_id)

    def forget(self, session_id: str) -> None:
        with self._lock:
            self.of.pop(session_id, None)


CLIENTS = SessionClients()  # one server's: UploadGate writes it, CappedUploads reads it


class CappedUploads(MemoryUploadedFileManager):
    """Streamlit's in-memory upload store, with caps per session and per server, and unclaimed files dropped."""

    def __init__(self, upload_endpoint: str, *, session_files: int = SESSION_FILES,
                 session_bytes: int = SESSION_BYTES, server_bytes: int = SERVER_BYTES,
                 unclaimed_s: float = UNCLAIMED_S, clock: Callable[[], float] = time.monotonic,
                 client_bytes: int | None = None, clients: SessionClients = CLIENTS) -> None:
        super().__init__(upload_endpoint)
        self.session_files, self.session_bytes, self.server_bytes = session_files, session_bytes, server_bytes
        self.client_bytes = settings.client_upload_bytes() if client_bytes is None else client_bytes
        self.clients = clients
        self.unclaimed_s, self.clock = unclaimed_s, clock
        self.unclaimed: dict[tuple[str, str], float] = {}  # (session, file id) -> when it arrived
        self.refused = 0
        self.dropped = 0

    def add_file(self, session_id: str, file: UploadedFileRec) -> None:
        with self._lock:
            mine = {k: v for k, v in self.file_storage.get(session_id, {}).items() if k != file.file_id}
            held = sum(len(f.data) for f in mine.values())
            replaced = self.file_storage.get(session_id, {}).get(file.file_id)
            server = self._total_bytes - (len(replaced.data) if replaced else 0)
            client = self.clients.client(session_id)
            theirs = held + sum(len(f.data) for other, files in self.file_storage.items()
                                if other != session_id and client is not None and self.clients.client(other) == client
                                for f in files.values())
            reason = (f"this page already holds {len(mine)} uploads" if len(mine) >= self.session_files else
                      f"this page already holds {held // MIB} MB of uploads" if held + len(file.data) >
                      self.session_bytes else
                      f"your address already holds {theirs // MIB} MB of uploads" if theirs + len(file.data) >
                      self.client_bytes else
                      "the server holds too many uploads right now" if server + len(file.data) > self.server_bytes
                      else None)
        if reason is not None:
            self.refused += 1
            raise HTTPException(status_code=429, detail=f"Upload refused: {reason}; remove one or try again later")
        super().add_file(session_id, file)
        self.unclaimed[(session_id, file.file_id)] = self.clock()
        self.drop_later(session_id, file.file_id)

    def get_files(self, session_id: str, file_ids: Sequence[str]) -> list[UploadedFileRec]:
        files = super().get_files(session_id, file_ids)
        for rec in files:  # a script run read it: the widget holds it now, until it lets go
            self.unclaimed.pop((session_id, rec.file_id), None)
        return files

    def remove_file(self, session_id: str, file_id: str) -> None:
        self.unclaimed.pop((session_id, file_id), None)
        super().remove_file(session_id, file_id)

    def remove_session_files(self, session_id: str) -> None:
        for key in [k for k in self.unclaimed if k[0] == session_id]:
            self.unclaimed.pop(key, None)
        super().remove_session_files(session_id)
        self.clients.forget(session_id)

    def drop_later(self, session_id: str, file_id: str) -> None:
        try:
            asyncio.get_running_loop().call_later(self.unclaimed_s, self.drop_if_unclaimed, session_id, file_id)
        except RuntimeError:  # no event loop here (not called by the server's upload route)
            timer = threading.Timer(self.unclaimed_s, self.drop_if_unclaimed, (session_id, file_id))
            timer.daemon = True
            timer.start()

    def drop_if_unclaimed(self, session_id: str, file_id: str) -> None:
        arrived = self.unclaimed.get((session_id, file_id))
        if arrived is not None and self.clock() - arrived >= self.unclaimed_s * 0.99:
            self.dropped += 1
            self.remove_file(session_id, file_id)


class UploadGate:
    """Pure ASGI middleware for uploads (PUT …/_stcore/upload_file/SESSION/FILE): a session with `per_session`
    already under way gets 429 for one more (it could not keep it anyway); the body is read whole on a deadline
    (408 if it stalls), then at most `per_server` uploads, and DLGUIDE_CLIENT_SLOTS of one client address, are
    handed to Streamlit at once (the others wait their turn, their bodies read)."""

    def __init__(self, app, base_url: str = "", per_session: int = SESSION_FILES,
                 per_server: int = INFLIGHT_SERVER) -> None:
        self.app = app
        base = base_url.strip("/")
        self.prefix = f"/{base}/_stcore/upload_file/" if base else "/_stcore/upload_file/"
        self.per_session = per_session
        self.turns = asyncio.Semaphore(per_server)
        self.inflight: dict[str, int] = {}
        self.slots = ClientSlots()  # per client address: bodies under way, and turns (issue 43, P2 and P5)

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "PUT" or not path.startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        session = path[len(self.prefix):].split("/", 1)[0]
        if self.inflight.get(session, 0) >= self.per_session:
            await refuse(send, 429, "Upload refused: too many uploads at once from this page")
            return
        client = self.slots.client(scope)
        CLIENTS.seen(session, client)
        self.inflight[session] = self.inflight.get(session, 0) + 1
        try:
            try:  # the body first, on a deadline, holding no turn: a slow one costs only its sender (issue 43, P2)
                async with self.slots.receiving(client):
                    data = await read_body(receive, self.max_bytes(), what="the upload")
            except BodyRefused as exc:
                await refuse(send, exc.status, f"Upload refused: {exc}")
                return
            async with self.slots.turn(client), self.turns:
                await self.app(scope, replay(data, receive), send)
        finally:
            self.inflight[session] -= 1
            if not self.inflight[session]:
                del self.inflight[session]

    def max_bytes(self) -> int:
        """Streamlit's own cap (server.maxUploadSize, MB) and room for the multipart form around the file."""
        from streamlit import config

        return int(config.get_option("server.maxUploadSize")) * MIB + MIB


def replay(data: bytes, receive):
    """An ASGI `receive` that gives the body already read, then whatever the connection says next."""
    given = False

    async def receive_again():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": data, "more_body": False}
        return await receive()

    return receive_again
