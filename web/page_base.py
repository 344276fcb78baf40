"""Streamlit's page tells its scripts where the server is, so a page load makes no failing request (issue 43).

Streamlit 1.67's frontend does not know the server's base path. On a page's address (/train, /devices) it tries
two candidates in turn, the page's own path and the one above it: `GET /train/_stcore/health` and
`/train/_stcore/host-config` answer 404, and the browser's console shows two "Failed to load resource" errors on
every page load. Answering them instead would be worse: the first candidate that answers becomes the base path of
the websocket and of every page link.

The frontend reads its server address from `window.__streamlit.BACKEND_BASE_URL` when a host page sets it
(Streamlit's embedding configuration); with the server root there (`server.baseUrlPath` included) it asks that
one address only. So the page Streamlit serves (its index.html, for every page's address) gets one inline script
that sets it, from the page's own origin, before Streamlit's module script. A page that already sets
window.__streamlit keeps its own. Nothing else is touched: any other response passes as it is; the page itself
is sent gzip-compressed when the browser takes it, as Streamlit would have.
"""

from __future__ import annotations

import gzip
import json

# Streamlit's index.html loads its bundle with this tag; the script goes right before it
MODULE_TAG = b'<script type="module"'
MAX_PAGE_BYTES = 1 * 2**20  # a bigger text/html response is not Streamlit's page: passed on as it is
NOT_PAGES = ("_stcore/", "static/", "media/", "component/", "_booth/", "app/static/")


def base_script(base_url: str) -> bytes:
    """The inline script for a server under `base_url` (server.baseUrlPath, "" at the root)."""
    base = base_url.strip("/")
    path = json.dumps(f"/{base}/" if base else "/")
    return (b"<script>window.__streamlit = window.__streamlit || {BACKEND_BASE_URL: location.origin + "
            + path.encode() + b"}</script>\n    ")


def with_base_script(page: bytes, script: bytes) -> bytes | None:
    """`page` with `script` before Streamlit's module tag; None if it has no such tag (not Streamlit's page)."""
    at = page.find(MODULE_TAG)
    return None if at < 0 else page[:at] + script + page[at:]


class PageBase:
    """Pure ASGI middleware: Streamlit's page (GET, 200, text/html) gets base_script before its module script."""

    def __init__(self, app, base_url: str = "") -> None:
        self.app = app
        base = base_url.strip("/")
        self.not_pages = tuple(f"/{base}/{p}" if base else f"/{p}" for p in NOT_PAGES)
        self.script = base_script(base_url)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET" or scope["path"].startswith(self.not_pages):
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", [])
        takes_gzip = any(name.lower() == b"accept-encoding" and b"gzip" in value.lower() for name, value in headers)
        # Streamlit's page uncompressed, so it can be read; compressed again below
        plain = {**scope, "headers": [(n, v) for n, v in headers if n.lower() != b"accept-encoding"]}
        held: dict = {}
        chunks: list[bytes] = []
        size = 0

        async def edit(message) -> None:
            nonlocal size
            if message["type"] == "http.response.start":
                kind = next((v for n, v in message.get("headers", []) if n.lower() == b"content-type"), b"")
                if message["status"] == 200 and kind.startswith(b"text/html"):
                    held["start"] = message  # sent with the edited body
                    return
                await send(message)
                return
            if "start" not in held or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > MAX_PAGE_BYTES:  # not Streamlit's page: on as it came
                await send(held.pop("start"))
                await send({"type": "http.response.body", "body": b"".join(chunks),
                            "more_body": message.get("more_body", False)})
                chunks.clear()
                return
            if not message.get("more_body", False):
                await self._send_page(send, held.pop("start"), b"".join(chunks), takes_gzip)

        await self.app(plain, receive, edit)

    async def _send_page(self, send, start: dict, page: bytes, takes_gzip: bool) -> None:
        edited = with_base_script(page, self.script)
        body = page if edited is None else edited
        headers = [(n, v) for n, v in start.get("headers", [])
                   if n.lower() not in (b"content-length", b"content-encoding")]
        if takes_gzip:
            body = gzip.compress(body, compresslevel=6, mtime=0)
            headers.append((b"content-encoding", b"gzip"))
        if not any(n.lower() == b"vary" for n, _ in headers):
            headers.append((b"vary", b"Accept-Encoding"))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})
