"""Requests from another origin are refused (issue 43, P1): a page on another port of the same host is not us.

Cookies ignore ports and SameSite=Lax counts every port of a host as one site, so the token's HttpOnly cookie
travelled with a websocket handshake that a page served by another local user on 127.0.0.1:8999 opened to the
owner's app on :8501, and Streamlit accepts an Origin of another port: that page had a full session. So, as
Jupyter does, every websocket upgrade and every request that is not GET/HEAD must come from this server's own
origin: its `Origin` header (or, without one, its `Referer`'s scheme://host:port) must be exactly the request's
own scheme://host:port (its scheme, as uvicorn gives it, X-Forwarded-Proto from a trusted proxy included, and its
Host header; a default port may be left out on either side). Anything else gets 403 (a websocket: closed before it
is accepted, which the server answers with 403), whatever token or cookie it carries.

A request with neither header is let through: browsers send Origin with every websocket handshake and every
cross-origin request that is not GET/HEAD (fetch, forms), so that is a script (curl, tests, bench/), which sends
the token or, on the booth, the XSRF cookie and header its requests need anyway. `Origin: null` is refused.
serve.py's stack (web/stack.py) puts it right behind the Host check, for the full app and for the booth.
"""

from __future__ import annotations

from urllib.parse import urlsplit

SAFE_METHODS = ("GET", "HEAD")
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an absolute http(s) URL, lower-cased, the default port filled in; None if it is
    not one (`null`, a relative or malformed URL)."""
    try:
        parts = urlsplit(url.strip())
        scheme, host, port = parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None
    if scheme not in DEFAULT_PORTS or not host:
        return None
    return scheme, host, port if port is not None else DEFAULT_PORTS[scheme]


def own_origin(scope) -> tuple[str, str, int] | None:
    """The request's own scheme://host:port: its scope's scheme (ws/wss read as http/https) and its Host header."""
    scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), scope.get("scheme", "http"))
    host = next((value.decode("latin-1") for name, value in scope.get("headers", []) if name.lower() == b"host"), "")
    return origin_of(f"{scheme}://{host}") if host else None


def claimed_origin(scope) -> str | None:
    """The Origin header, else the Referer header; None when the request has neither."""
    headers = {name.lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}
    return headers.get(b"origin", headers.get(b"referer"))


def same_origin(scope) -> bool:
    claimed = claimed_origin(scope)
    if claimed is None:
        return True  # not a browser's request (see the module's note)
    theirs = origin_of(claimed)
    return theirs is not None and theirs == own_origin(scope)


class OriginCheck:
    """Pure ASGI middleware: a websocket upgrade or a request other than GET/HEAD from another origin gets 403."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        checked = scope["type"] == "websocket" or (
            scope["type"] == "http" and scope.get("method", "GET") not in SAFE_METHODS)
        if not checked or same_origin(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accept: the server answers 403
            return
        body = b"Refused: this request came from a page of another origin (another port or host)"
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"cache-control", b"no-store"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
