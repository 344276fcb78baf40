"""A token on every visit of the full app (issue 33, N1): loopback is not private on a shared host.

A login node is multi-user: any local user reaches 127.0.0.1. So, as Jupyter has done since 4.3, serve.py gives
the full app a random token unless sign-in ([auth]) is configured, and prints `http://127.0.0.1:PORT/?token=…`.
The token is DLGUIDE_TOKEN when set, else the one kept in $DLGUIDE_HOME/server-token (mode 0600, made on the
first start and reused: a bookmark and the browser's cookie survive a restart; delete the file for a new one).

The first visit with `?token=` gets an HttpOnly cookie (a digest of the token, never the token) and a redirect to
the same address without the token, so it leaves the address bar and the history. Then every request carries the
cookie. `Authorization: token …` works too (scripts). Without either, every page, upload and the websocket
upgrade (/_stcore/stream) answer 403; a page explains how to get in and holds no secret. Only the health check
stays open (`/_stcore/health`): it says "ok" and nothing else, and monitoring probes and the launcher need it.
The public booth (DLGUIDE_KIOSK=1) has no gate: it is read-only by design.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

TOKEN_ENV = "DLGUIDE_TOKEN"
TOKEN_FILE = "server-token"
TOKEN_PARAM = "token"
MIN_TOKEN_CHARS = 16  # a shorter token on a multi-user host is a guess away
MIN_TOKEN_DISTINCT = 8  # "a" x 16, "abab…" are no secret
MIN_TOKEN_BITS = 64  # length x log2(different characters): new_token()'s 43 characters count about 250
COOKIE_MAX_AGE_S = 30 * 24 * 3600
OPEN_PATHS = ("_stcore/health",)  # "ok" only: probes and serve.wait_healthy need it without a token


class TokenRefused(ValueError):
    """A DLGUIDE_TOKEN the server will not serve with (one line, for serve.py's refusal)."""


@dataclass(frozen=True)
class ServerToken:
    value: str
    source: str  # "DLGUIDE_TOKEN", or the file it came from (said on the console, never the value)


def new_token() -> str:
    return secrets.token_urlsafe(32)  # 256 bits, URL-safe (it travels in a query string)


def token_problem(token: str) -> str | None:
    """Why `token` is too weak to guard a server on a shared machine, or None: it needs MIN_TOKEN_CHARS printable
    ASCII characters at least (no spaces, no control characters), MIN_TOKEN_DISTINCT different ones, and about
    MIN_TOKEN_BITS by a plain count (its length x log2 of its different characters: "a" x 16 is 0 bits)."""
    if len(token) < MIN_TOKEN_CHARS or any(not 33 <= ord(c) <= 126 for c in token):
        return f"at least {MIN_TOKEN_CHARS} printable ASCII characters with no spaces or control characters"
    distinct = len(set(token))
    if distinct < MIN_TOKEN_DISTINCT or len(token) * math.log2(distinct) < MIN_TOKEN_BITS:
        return (f"varied: at least {MIN_TOKEN_DISTINCT} different characters, and length x log2(different "
                f"characters) >= {MIN_TOKEN_BITS} (this one has {distinct} different in {len(token)})")
    return None


def load_token(home: Path | None = None) -> ServerToken:
    """The server's token: DLGUIDE_TOKEN, else `home` (default DLGUIDE_HOME)/server-token, made (mode 0600) when
    missing. A file that others can read or that is not ours is replaced: a token others have seen protects
    nothing. Anything that keeps the server from a token it can trust is a TokenRefused (one line, exit 2)."""
    given = os.environ.get(TOKEN_ENV, "").strip()
    if given:
        problem = token_problem(given)
        if problem:
            raise TokenRefused(f"{TOKEN_ENV} must be {problem} (python -c 'import secrets; "
                               f"print(secrets.token_urlsafe(32))' makes one)")
        return ServerToken(given, TOKEN_ENV)
    where = str(home / TOKEN_FILE) if home is not None else f"$DLGUIDE_HOME/{TOKEN_FILE}"
    try:
        if home is None:
            from dlguide_core import settings

            home = settings.home()
            where = str(home / TOKEN_FILE)
        return token_file(home / TOKEN_FILE)
    except OSError as exc:
        raise TokenRefused(f"cannot keep the server's token in {where}: {exc.strerror or exc} (fix DLGUIDE_HOME, "
                           f"or set {TOKEN_ENV})") from None


def token_file(path: Path) -> ServerToken:
    """The token kept at `path`, or a new one put there whole: written to a file of its own, then linked into
    place, which fails if another server got there first (two servers on a fresh home), and then theirs is read."""
    for _ in range(5):
        try:
            info = path.lstat()
        except FileNotFoundError:
            info = None
        if info is not None:
            if stat.S_ISDIR(info.st_mode):
                raise TokenRefused(f"{path} is a directory, not the server's token: remove it (a new token is made) "
                                   f"or set {TOKEN_ENV}")
            private = stat.S_ISREG(info.st_mode) and not info.st_mode & 0o077 and info.st_uid == os.geteuid()
            value = path.read_text().strip() if private else ""
            if private and len(value) >= MIN_TOKEN_CHARS:
                return ServerToken(value, str(path))
            path.unlink(missing_ok=True)  # readable by others, not ours, a link or too short: replaced below
        draft = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(new_token() + "\n")
            os.link(draft, path)  # atomic, and never over a file another server has just put there
        except FileExistsError:
            continue  # another server made it first: read theirs
        finally:
            draft.unlink(missing_ok=True)
    raise TokenRefused(f"{path} keeps changing (another server replacing it?): stop the other server, or set "
                       f"{TOKEN_ENV}")


def cookie_name(port: int) -> str:
    """Per port, as Jupyter does: cookies ignore ports, so two servers on one host must not share a name."""
    return f"dlguide_token_{port}"


def cookie_value(token: str) -> str:
    """What the cookie holds: a digest of the token (the token itself stays out of the browser's storage)."""
    return hmac.new(token.encode(), b"dlguide server cookie", hashlib.sha256).hexdigest()


def entry_url(base: str, token: str, path: str = "/") -> str:
    """The address that lets a browser in: `base` (http://host:port[/base path]) + `path` + ?token=…"""
    return f"{base.rstrip('/')}/{path.lstrip('/')}?{TOKEN_PARAM}={quote(token, safe='')}"


WRONG_TOKEN = ("<p><b>The token you came with is not this server's</b>: it was cut or mistyped, it is another "
               "dlguide's, or this one's token has changed since. Use the address it printed this time.</p>")


def refusal_page(port: int, wrong: bool = False) -> bytes:
    """The 403 page: how to get in, and no secret (not even the token file's full path); `wrong`: a token (in the
    address or a cookie) came and is not this server's, which the page says first (issue 43: a wrong token showed
    the page of no token)."""
    title, heading = ("token not accepted", "This token is not this dlguide's") if wrong else (
        "token needed", "This dlguide asks for its token")
    text = (f"<!doctype html><html><head><meta charset='utf-8'><title>dlguide: {title}</title></head>"
            f"<body style='font-family:sans-serif;max-width:40em;margin:3em auto;line-height:1.5'>"
            f"<h1>{heading}</h1>" + (WRONG_TOKEN if wrong else "") +
            f"<p>It is somebody's dashboard on a shared machine, so it only opens with the address that "
            f"<code>make run</code> printed when it started: <code>http://127.0.0.1:{port}/?token=…</code>.</p>"
            f"<p>If you started it: the token is also in the file <code>{TOKEN_FILE}</code> in your "
            f"<code>DLGUIDE_HOME</code> (or in <code>{TOKEN_ENV}</code> if you set it). Open this address with "
            f"<code>?token=</code> and the token at its end; the browser then remembers it.</p>"
            f"<p>A team server should use sign-in instead (README: Serving to a team).</p></body></html>")
    return text.encode()


class TokenGate:
    """Pure ASGI middleware: a request with the token's cookie, `?token=` or `Authorization: token` goes on;
    anything else but the health check gets 403 (the websocket upgrade is closed before it is accepted,
    which the server answers with 403)."""

    def __init__(self, app, token: str, port: int, base_url: str = "") -> None:
        self.app = app
        self.token = token.encode()
        self.cookie = cookie_value(token).encode()
        self.cookie_name = cookie_name(port).encode()
        self.port = port
        base = base_url.strip("/")
        self.prefix = f"/{base}/" if base else "/"
        self.open_paths = {self.prefix + path for path in OPEN_PATHS}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket") or (
                scope["type"] == "http" and scope.get("path", "") in self.open_paths):
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [value for name, value in query if name == TOKEN_PARAM]
        if given and self.same(given[-1].encode(), self.token):
            if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
                await self.let_in(scope, send, [(n, v) for n, v in query if n != TOKEN_PARAM])
                return
            await self.app(scope, receive, send)
            return
        if self.carries_credentials(scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accept: the server answers 403
            return
        body = refusal_page(self.port, wrong=bool(given) or self.stale_cookie(scope.get("headers", [])))
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body if scope.get("method") != "HEAD" else b""})

    @staticmethod
    def same(a: bytes, b: bytes) -> bool:
        return hmac.compare_digest(a, b)  # constant time: no timing hints about the token

    def carries_credentials(self, headers: list[tuple[bytes, bytes]]) -> bool:
        for name, value in headers:
            name = name.lower()
            if name == b"cookie":
                for item in value.split(b";"):
                    key, _, cookie = item.strip().partition(b"=")
                    if key == self.cookie_name and self.same(cookie.strip(), self.cookie):
                        return True
            elif name == b"authorization":
                scheme, _, credential = value.strip().partition(b" ")
                if scheme.lower() == b"token" and self.same(credential.strip(), self.token):
                    return True
        return False

    def stale_cookie(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """Whether the request carries this port's token cookie (one that did not let it in: another token's)."""
        return any(item.strip().partition(b"=")[0] == self.cookie_name for name, value in headers
                   if name.lower() == b"cookie" for item in value.split(b";"))

    async def let_in(self, scope, send, rest: list[tuple[str, str]]) -> None:
        """303 to the same address without the token, setting the cookie (HttpOnly, SameSite=Lax)."""
        path = "/" + scope.get("path", "/").lstrip("/")  # never "//host": no redirect off this server
        location = quote(path, safe="/:@!$&'()*+,;=-._~") + (f"?{urlencode(rest)}" if rest else "")
        attributes = f"HttpOnly; SameSite=Lax; Path=/; Max-Age={COOKIE_MAX_AGE_S}"
        if scope.get("scheme") == "https":
            attributes += "; Secure"
        cookie = self.cookie_name + b"=" + self.cookie + b"; " + attributes.encode()
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", location.encode()), (b"set-cookie", cookie),
                                (b"cache-control", b"no-store"), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
