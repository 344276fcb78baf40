"""Request bodies read whole, on a deadline and at a minimum rate, before they take a slot (issue 43, P2 and P5).

32 sockets sending one byte every 5 s held every slot of the public booth's route (the route took its slot, then
read the body): a visitor waited 55 s. 8 slow uploads from one session did the same to every upload. Here a body is
read first, with nothing held but its bytes so far: it must keep up BODY_MIN_RATE (bytes/s, averaged since the
request came, from BODY_GRACE_S on) and end within BODY_DEADLINE_S (dlguide_core/settings.py), or its sender gets
408 and the connection is closed. Only then does the request wait for a slot, and one client address holds at most
DLGUIDE_CLIENT_SLOTS of them (`ClientSlots`): its other requests wait behind its own. The client address is the
socket's peer, or what a trusted reverse proxy forwards (uvicorn's proxy headers, trusted from 127.0.0.1).

    read_body(receive, max_bytes, *, what="the request body", deadline_s=None, min_rate=None) -> bytes
        raises BodyRefused(status, one line): 408 too slow, 413 past max_bytes, 400 cut short or empty
    ClientSlots(per_client=None, pending=None): .client(scope) -> str, .receiving(client) (429 past `pending`
        bodies at once), .turn(client) (at most `per_client` at once; the rest wait)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from dlguide_core import settings


class BodyRefused(Exception):
    """A body not read: `status` (400, 408, 413, 429) and a one-line reason for its sender."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_body(receive, max_bytes: int, *, what: str = "the request body", deadline_s: float | None = None,
                    min_rate: float | None = None, grace_s: float = settings.BODY_GRACE_S,
                    clock: Callable[[], float] = time.monotonic) -> bytes:
    """The request's body from ASGI's `receive`, refused as soon as it passes `max_bytes` (413), falls below
    `min_rate` bytes/s after `grace_s` or is still arriving after `deadline_s` (408: never waited on longer), or
    ends early or empty (400)."""
    deadline_s = settings.body_deadline_s() if deadline_s is None else deadline_s
    min_rate = settings.body_min_rate() if min_rate is None else min_rate
    began = clock()
    chunks: list[bytes] = []
    total = 0
    while True:
        # the latest moment the next bytes may come: the deadline, or when `total` falls behind the rate
        latest = min(began + deadline_s, began + grace_s + total / min_rate)
        try:
            message = await asyncio.wait_for(receive(), timeout=max(0.0, latest - clock()))
        except asyncio.TimeoutError:
            raise BodyRefused(408, f"{what} came too slowly ({total} bytes in {clock() - began:.0f} s); "
                                   f"send it again") from None
        if message["type"] == "http.disconnect":
            raise BodyRefused(400, f"{what} did not arrive whole")
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > max_bytes:
            raise BodyRefused(413, f"{what} is too large (over {max_bytes / 2**20:.0f} MB)")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    if not total:
        raise BodyRefused(400, f"{what} is missing: nothing came with the request")
    return b"".join(chunks)


@dataclass
class _Client:
    turns: asyncio.Semaphore
    pending: int = 0  # bodies being received
    working: int = 0  # holders of a turn, and those waiting for one


class ClientSlots:
    """Per client address: at most `pending` bodies received at once (429 past it) and `per_client` requests
    worked on at once (the rest wait their turn, behind this client's own)."""

    def __init__(self, per_client: int | None = None, pending: int | None = None) -> None:
        self.per_client = per_client or settings.client_slots()
        self.pending = pending or settings.CLIENT_PENDING
        self.clients: dict[str, _Client] = {}

    @staticmethod
    def client(scope) -> str:
        peer = scope.get("client")
        return str(peer[0]) if peer else "unknown"

    def _get(self, client: str) -> _Client:
        entry = self.clients.get(client)
        if entry is None:
            entry = self.clients[client] = _Client(turns=asyncio.Semaphore(self.per_client))
        return entry

    def _release(self, client: str, entry: _Client) -> None:
        if not entry.pending and not entry.working:
            self.clients.pop(client, None)  # an address with nothing under way holds nothing

    @asynccontextmanager
    async def receiving(self, client: str) -> AsyncIterator[None]:
        entry = self._get(client)
        if entry.pending >= self.pending:
            raise BodyRefused(429, f"too many requests at once from your address ({self.pending} bodies under way)")
        entry.pending += 1
        try:
            yield
        finally:
            entry.pending -= 1
            self._release(client, entry)

    @asynccontextmanager
    async def turn(self, client: str) -> AsyncIterator[None]:
        entry = self._get(client)
        entry.working += 1
        try:
            async with entry.turns:
                yield
        finally:
            entry.working -= 1
            self._release(client, entry)


async def refuse(send, status: int, message: str, content_type: str = "text/plain; charset=utf-8",
                 body: bytes | None = None) -> None:
    """Answer `status` with one line (or `body`) and close the connection: a body left unread is not waited for."""
    payload = message.encode() if body is None else body
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(payload)).encode()),
                            (b"cache-control", b"no-store"), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": payload})
