"""Where the job store lives: DLGUIDE_STORE_URL, read once per open and never shown with its password.

Unset: `sqlite:///$DLGUIDE_HOME/jobs.db` (one machine). `postgresql://USER:PASSWORD@HOST:PORT/DB`:
a server that several hosts share (DLGUIDE_HOME then on a shared filesystem, for the job folders).
Job processes inherit the URL through their environment, never their argv; everything shown to
a person uses `masked` (`postgresql://user:***@host:port/db`).

One parser (`split_url`) reads every URL dlguide is given (store URLs, Ray addresses) and decides what is secret:
the password of the user part, however written (a raw `@` or space in it: the user part ends at the last `@`
before the host), and every `password=`-like query parameter. `mask_url` shows a URL without them; a URL it
cannot read is shown as its scheme alone (`postgresql://***`), never raw. `mask` does the same for every URL
inside a free text (a library's error message).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote, unquote

from dlguide_core import settings
from dlguide_core.errors import StoreError

ENV = "DLGUIDE_STORE_URL"
DB_FILE = "jobs.db"  # in DLGUIDE_HOME, beside the `jobs/` folder of job folders
# Query parameters that carry a secret (libpq's `password`/`sslpassword`, and the usual names of tokens).
SECRET_KEYS = frozenset({"password", "passwd", "pwd", "pass", "sslpassword", "secret", "token", "access_token",
                         "api_key", "apikey", "key"})
HIDDEN = "***"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_SECRET_IN_TEXT = re.compile(r"\b(" + "|".join(sorted(SECRET_KEYS)) + r")=(?!\*\*\*)[^\s&'\"]+", re.IGNORECASE)
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s\x00-\x1f\x7f:/?#@\[\]]*)(:\d{0,5})?")
_CONTROL_OR_SPACE = re.compile(r"[\s\x00-\x1f\x7f]")


class UrlError(ValueError):
    """A URL that cannot be read; its message never quotes the URL."""


@dataclass(frozen=True, repr=False)
class UrlParts:
    """A URL cut into its parts, user and password decoded (`%40` -> `@`)."""

    scheme: str
    user: str | None
    password: str | None
    host: str  # host[:port], as written
    path: str  # from the first `/` after the host, up to `?` or `#`
    query: tuple[tuple[str, str], ...]  # decoded (name, value) pairs, in order
    fragment: str | None

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret in the URL: the password and each secret query value (non-empty)."""
        found = [self.password or ""] + [v for k, v in self.query if k.lower() in SECRET_KEYS]
        return tuple(s for s in found if s)

    def text(self, *, hide: bool) -> str:
        """The URL, encoded as libpq and HTTP clients expect (a raw `@` or space in the password: %40, %20); with
        `hide`, every secret replaced by ***."""
        userinfo = ""
        if self.user is not None:
            userinfo = quote(self.user, safe="")
            if self.password is not None:
                userinfo += ":" + (HIDDEN if hide else quote(self.password, safe=""))
            userinfo += "@"
        query = "&".join(f"{quote(k, safe='')}="
                         + (HIDDEN if hide and k.lower() in SECRET_KEYS else quote(v, safe=""))
                         for k, v in self.query)
        return (f"{self.scheme}://{userinfo}{self.host}{self.path}" + (f"?{query}" if self.query else "")
                + (f"#{self.fragment}" if self.fragment is not None else ""))

    @property
    def masked(self) -> str:
        return self.text(hide=True)

    def __repr__(self) -> str:
        return f"UrlParts({self.masked!r})"


def split_url(raw: str) -> UrlParts:
    """`raw` in parts (UrlError, never quoting `raw`, when it is not SCHEME://[USER[:PASSWORD]@]HOST[:PORT]...)."""
    found = _SCHEME.match(raw)
    if found is None:
        raise UrlError("it does not start with SCHEME://")
    rest = raw[found.end():]
    authority_end = _first_of(rest, "/?#")
    at = rest.rfind("@", 0, authority_end)
    if at >= 0:  # the user part ends at the last `@` before the host: a raw `@` in a password stays in it
        userinfo, rest = rest[:at], rest[at + 1:]
        authority_end = _first_of(rest, "/?#")
        user, colon, password = userinfo.partition(":")
        user_part: str | None = unquote(user)
        password_part = unquote(password) if colon else None
    else:
        user_part = password_part = None
    host, rest = rest[:authority_end], rest[authority_end:]
    if not _HOST.fullmatch(host):
        raise UrlError("its host[:port] is not a host name and port number")
    rest, hash_, fragment = rest.partition("#")
    path, question, query = rest.partition("?")
    if _CONTROL_OR_SPACE.search(path) or _CONTROL_OR_SPACE.search(fragment):
        raise UrlError("it has a space or control character after the host: percent-encode it (%20)")
    pairs = tuple((unquote(k), unquote(v)) for k, _, v in (item.partition("=") for item in query.split("&") if item))
    return UrlParts(found.group(1).lower(), user_part, password_part, host, path, pairs if question else (),
                    fragment if hash_ else None)


def _first_of(text: str, chars: str) -> int:
    return min((i for i in (text.find(c) for c in chars) if i >= 0), default=len(text))


def mask_url(raw: str) -> str:
    """`raw` without its secrets; a URL that cannot be read shows its scheme alone, never its text."""
    try:
        return split_url(raw).masked
    except UrlError:
        scheme = _SCHEME.match(raw)
        return f"{scheme.group(1)}://{HIDDEN}" if scheme else HIDDEN


def mask(text: str) -> str:
    """`text` with every secret of every URL in it hidden (and `password=...` pairs outside URLs)."""
    def one(found: re.Match[str]) -> str:
        url = found.group(0)
        return mask_url(url) if "@" in url or "=" in url else url

    return _SECRET_IN_TEXT.sub(lambda m: f"{m.group(1)}={HIDDEN}", _URL_IN_TEXT.sub(one, text))


@dataclass(frozen=True, repr=False)
class StoreUrl:
    raw: str  # with its password: only for connecting and for a job process's environment

    @property
    def backend(self) -> str:
        return "sqlite" if self.raw.startswith("sqlite:") else "postgresql"

    @property
    def path(self) -> Path | None:
        """The SQLite database file; None for a server."""
        return Path(self.raw.removeprefix("sqlite://")) if self.backend == "sqlite" else None

    @property
    def masked(self) -> str:
        return self.raw if self.backend == "sqlite" else mask_url(self.raw)

    @property
    def password(self) -> str | None:
        return split_url(self.raw).password if self.backend == "postgresql" else None

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be shown: the password and any `password=` query value (decoded and as written)."""
        if self.backend == "sqlite":
            return ()
        found = split_url(self.raw).secrets
        return tuple({*found, *(quote(s, safe="") for s in found)})

    def hide_secrets(self, text: str) -> str:
        """`text` (a library's message) with this URL's secrets hidden, even where no URL surrounds them."""
        text = mask(text)
        for secret in sorted(self.secrets, key=len, reverse=True):
            if len(secret) >= 3:  # a shorter one would garble the message (and says little)
                text = text.replace(secret, HIDDEN)
        return text

    def __repr__(self) -> str:
        return f"StoreUrl({self.masked!r})"

    __str__ = __repr__


def sqlite_url(path: str | Path) -> StoreUrl:
    return StoreUrl(f"sqlite://{Path(path).expanduser().resolve()}")


def store_url(url: str | Path | StoreUrl | None = None) -> StoreUrl:
    """The store to open: `url` (a URL, or a SQLite file's path), else DLGUIDE_STORE_URL, else
    jobs.db in DLGUIDE_HOME. A URL of another kind, or one that cannot be read, is one clear error (masked).
    A PostgreSQL URL is kept re-encoded (a raw `@` or space in its password: %40, %20), as libpq reads it."""
    if isinstance(url, StoreUrl):
        return url
    if isinstance(url, Path):
        return sqlite_url(url)
    raw = (url if url is not None else os.environ.get(ENV, "")).strip()
    if not raw:
        return sqlite_url(_home() / DB_FILE)
    if raw.startswith("sqlite:///"):
        return sqlite_url(raw.removeprefix("sqlite://"))
    if "://" not in raw:
        return sqlite_url(raw)  # a plain path
    usage = "use sqlite:///PATH/jobs.db or postgresql://USER:PASSWORD@HOST:PORT/DB"
    try:
        parts = split_url(raw)
    except UrlError as exc:
        raise StoreError(f"{ENV}={mask_url(raw)} cannot be read ({exc}): {usage}") from None
    if parts.scheme in ("postgresql", "postgres") and parts.host.split(":")[0] and parts.path.strip("/"):
        return StoreUrl(replace(parts, scheme="postgresql").text(hide=False))
    raise StoreError(f"{ENV}={parts.masked} is not a store URL: {usage}")


def _home() -> Path:
    try:
        return settings.home()
    except OSError as exc:  # DLGUIDE_HOME is a file, or cannot be created
        from dlguide_core.jobs.store_errors import from_os

        if isinstance(exc, (FileExistsError, NotADirectoryError)):
            raise StoreError(f"DLGUIDE_HOME={os.environ.get('DLGUIDE_HOME')} is not a folder: point "
                             "DLGUIDE_HOME at a folder (it holds the jobs and their store)") from None
        raise from_os(exc, Path(os.environ.get("DLGUIDE_HOME", ".dlguide"))) from None
