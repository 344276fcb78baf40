"""Streamlit's own scripts and styles, sent gzip-compressed (issue 18: the first visit on a network).

Streamlit 1.67 leaves its static files (/static/..., about 3 MB of JavaScript and CSS for a first visit) out
of its gzip middleware, a choice made for loopback. A visitor on a lab's network downloads all of it raw, and
that download is most of their first wait. These files are hashed and immutable, so each is compressed once,
off the event loop, on its first request, and kept; later visitors get the stored bytes. Anything else
(a missing file, a range request, a client without gzip, fonts and images that are compressed already) goes to
Streamlit unchanged. serve.py puts this in front of Streamlit's middleware, after the host check.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path

COMPRESSED_TYPES = {".js", ".mjs", ".css", ".json", ".map", ".svg", ".txt", ".html"}
LEVEL = 6  # zlib's default: within ~3% of level 9's size here, at a third of its CPU
MAX_FILE_BYTES = 8 * 2**20  # bigger files go to Streamlit as they are (none of 1.67's are)
IMMUTABLE = "public, immutable, max-age=31536000"  # what Streamlit sends for these hashed files


@dataclass(frozen=True)
class Compressed:
    body: bytes
    etag: str
    media_type: str


def compress_file(path: Path) -> Compressed:
    raw = path.read_bytes()
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if media_type.startswith("text/") or media_type in {"application/javascript", "application/json"}:
        media_type += "; charset=utf-8"
    body = gzip.compress(raw, compresslevel=LEVEL, mtime=0)  # mtime 0: the same bytes every time
    return Compressed(body, '"gz-' + hashlib.sha256(raw).hexdigest()[:32] + '"', media_type)


def static_file(static_dir: Path, path: str, prefix: str) -> Path | None:
    """The file under `static_dir` that the request path names, if it is one we compress; None otherwise
    (including any path that would leave the folder)."""
    if not path.startswith(prefix):
        return None
    relative = path[len(prefix):]
    parts = relative.split("/")
    if "\\" in relative or "\x00" in relative or any(part in ("", ".", "..") for part in parts):
        return None
    candidate = (static_dir / "static" / relative).resolve()
    root = (static_dir / "static").resolve()
    if root not in candidate.parents or candidate.suffix not in COMPRESSED_TYPES or not candidate.is_file():
        return None
    return candidate if candidate.stat().st_size <= MAX_FILE_BYTES else None


def accepts_gzip(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether Accept-Encoding names gzip with a non-zero q."""
    for name, value in headers:
        if name.lower() != b"accept-encoding":
            continue
        for item in value.split(b","):
            coding, *params = [part.strip().lower() for part in item.split(b";")]
            if coding == b"gzip":
                q = next((p[2:] for p in params if p.startswith(b"q=")), b"1")
                try:
                    return float(q) > 0
                except ValueError:
                    return False
    return False


class GzipStatic:
    """Pure ASGI middleware: GET /static/<file> with Accept-Encoding: gzip gets the stored compressed bytes."""

    def __init__(self, app, static_dir: str | Path, base_url: str = "") -> None:
        self.app = app
        self.static_dir = Path(static_dir)
        base = base_url.strip("/")
        self.prefix = f"/{base}/static/" if base else "/static/"
        self.cache: dict[Path, Compressed] = {}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", [])
        path = static_file(self.static_dir, scope.get("path", ""), self.prefix)
        if path is None or not accepts_gzip(headers) or any(name.lower() == b"range" for name, _ in headers):
            await self.app(scope, receive, send)
            return
        entry = self.cache.get(path)
        if entry is None:
            entry = self.cache[path] = await asyncio.to_thread(compress_file, path)  # off the event loop
        answer = [(b"content-type", entry.media_type.encode()), (b"content-encoding", b"gzip"),
                  (b"vary", b"Accept-Encoding"), (b"cache-control", IMMUTABLE.encode()),
                  (b"etag", entry.etag.encode())]
        if any(name.lower() == b"if-none-match" and entry.etag.encode() in value for name, value in headers):
            await send({"type": "http.response.start", "status": 304, "headers": answer})
            await send({"type": "http.response.body", "body": b""})
            return
        answer.append((b"content-length", str(len(entry.body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": answer})
        await send({"type": "http.response.body", "body": entry.body})
