"""After signing in, the visitor lands on the page they asked for (issue 31, item 8).

An anonymous visit to /train in a signed-in deployment shows the sign-in page (app.py routes each page's address
to it). Pressing "Sign in" takes the browser to Streamlit's /auth/login, then the provider, then /oauth2callback,
which sends everyone to "/". This middleware notes the page the visitor came from (the Referer of /auth/login, a
page address of this app only) in a short-lived HttpOnly cookie, and turns the callback's redirect to "/" into one
to that page. Streamlit 1.67's auth routes are untouched: only their redirect's Location header changes.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

COOKIE = b"dlguide_return"
COOKIE_MAX_AGE_S = 600  # a sign-in takes a minute or two
PAGE = re.compile(r"^[a-z0-9_-]{1,64}$")  # a page's url_path (st.Page), nothing else


def page_of(referer: str, host: str, prefix: str) -> str | None:
    """The page name in `referer` when it is one of this app's pages (same host, under `prefix`), else None."""
    parts = urlsplit(referer)
    if parts.netloc.lower() != host.lower() or not parts.path.startswith(prefix):
        return None
    name = parts.path[len(prefix):].strip("/")
    return name if PAGE.match(name) else None


def header(headers: list[tuple[bytes, bytes]], wanted: bytes) -> str:
    return next((value.decode("latin-1") for name, value in headers if name.lower() == wanted), "")


def cookie(headers: list[tuple[bytes, bytes]]) -> str | None:
    for item in header(headers, b"cookie").split(";"):
        name, _, value = item.strip().partition("=")
        if name == COOKIE.decode() and PAGE.match(value):
            return value
    return None


class ReturnAfterSignIn:
    """Pure ASGI middleware for signed-in deployments (serve.py adds it when [auth] is configured)."""

    def __init__(self, app, base_url: str = "") -> None:
        self.app = app
        base = base_url.strip("/")
        self.prefix = f"/{base}/" if base else "/"
        self.login, self.callback = self.prefix + "auth/login", self.prefix + "oauth2callback"

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        headers = scope.get("headers", []) if path in (self.login, self.callback) else []
        if path == self.login:
            page = page_of(header(headers, b"referer"), header(headers, b"host"), self.prefix)
            if page is not None:
                await self.app(scope, receive, self.adding(send, COOKIE + b"=" + page.encode() +
                               f"; HttpOnly; SameSite=Lax; Path=/; Max-Age={COOKIE_MAX_AGE_S}".encode()))
                return
        elif path == self.callback and (page := cookie(headers)) is not None:
            await self.app(scope, receive, self.adding(send, COOKIE + b"=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0",
                                                       (self.prefix + page).encode()))
            return
        await self.app(scope, receive, send)

    def adding(self, send, set_cookie: bytes, home_to: bytes | None = None):
        """`send`, with `set_cookie` on the response, and a redirect to the app's root sent to `home_to`."""
        async def wrapped(message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if home_to is not None and message.get("status") in (302, 303, 307):
                    headers = [(n, home_to if n.lower() == b"location" and v == self.prefix.encode() else v)
                               for n, v in headers]
                message = {**message, "headers": [*headers, (b"set-cookie", set_cookie)]}
            await send(message)
        return wrapped
