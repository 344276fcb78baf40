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
from collections.abc import MutableMapping
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
# libpq's connection keywords (a `host=... user=... password=...` string is one of them, never a file name).
LIBPQ_KEYWORDS = frozenset({
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "require_auth", "channel_binding",
    "connect_timeout", "client_encoding", "options", "application_name", "fallback_application_name", "keepalives",
    "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout", "replication", "gssencmode",
    "sslmode", "requiressl", "sslcompression", "sslcert", "sslkey", "sslpassword", "sslcertmode", "sslrootcert",
    "sslcrl", "sslcrldir", "sslsni", "requirepeer", "ssl_min_protocol_version", "ssl_max_protocol_version",
    "krbsrvname", "gsslib", "gssdelegation", "service", "target_session_attrs", "load_balance_hosts"})
_KEYWORD_PAIR = re.compile(r"\s*([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'?|\S*)")


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


def keyword_pairs(raw: str) -> tuple[tuple[str, str], ...] | None:
    """`raw` as a libpq keyword string (`host=db user=u password='a b'`), in (keyword, value) pairs; None when it is
    not one (no libpq keyword in it, or text between the pairs)."""
    pairs, at = [], 0
    while at < len(raw.rstrip()):
        found = _KEYWORD_PAIR.match(raw, at)
        if found is None or found.end() == at:
            return None
        value = found.group(2)
        if value.startswith("'"):
            value = re.sub(r"\\(.)", r"\1", value[1:-1] if len(value) > 1 and value.endswith("'") else value[1:])
        pairs.append((found.group(1), value))
        at = found.end()
    return tuple(pairs) if any(k.lower() in LIBPQ_KEYWORDS for k, _ in pairs) else None


def looks_like_keywords(raw: str) -> bool:
    """Whether `raw` holds a libpq `keyword=value` pair (anywhere), so that it must never become a file name."""
    return keyword_pairs(raw) is not None or re.search(
        r"(?:^|\s)(" + "|".join(sorted(LIBPQ_KEYWORDS)) + r")\s*=", raw, re.IGNORECASE) is not None


def mask_keywords(raw: str) -> str:
    """A libpq keyword string with every secret value hidden (`host=db user=u password=***`); one it cannot read
    shows its keywords alone."""
    pairs = keyword_pairs(raw)
    if pairs is None:
        return " ".join(f"{k}={HIDDEN}" for k in re.findall(r"([A-Za-z_]+)\s*=", raw)) or HIDDEN
    return " ".join(f"{k}={HIDDEN if k.lower() in SECRET_KEYS else _keyword_value(v)}" for k, v in pairs)


def _keyword_value(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'" if not value or _CONTROL_OR_SPACE.search(value) \
        else value


def _keywords_as_url(pairs: tuple[tuple[str, str], ...]) -> str:
    """The URL a keyword string means, its secrets shown as *** (what to write instead)."""
    found = dict((k.lower(), v) for k, v in pairs)
    user = found.get("user")
    userinfo = (quote(user, safe="") + (f":{HIDDEN}" if found.get("password") else "") + "@") if user else ""
    host = found.get("host") or found.get("hostaddr") or "HOST"
    port = f":{found['port']}" if found.get("port") else ""
    rest = [f"{quote(k, safe='')}={HIDDEN if k in SECRET_KEYS else quote(v, safe='')}" for k, v in found.items()
            if k not in ("user", "password", "host", "hostaddr", "port", "dbname")]
    if not user and found.get("password"):
        rest.append(f"password={HIDDEN}")
    return (f"postgresql://{userinfo}{quote(host, safe='')}{port}/{quote(found.get('dbname') or 'DB', safe='')}"
            + (f"?{'&'.join(rest)}" if rest else ""))


def absolute_environment(environ: MutableMapping[str, str] | None = None) -> None:
    """Make a relative SQLite path in DLGUIDE_STORE_URL absolute, once, where the command or the server starts, so
    every process it starts (a detached job runs in the checkout) opens the same store. Anything else is left as
    it is (an unreadable value is reported, in one line, when the store is opened)."""
    environ = os.environ if environ is None else environ
    raw = environ.get(ENV, "").strip()
    if not raw or not (raw.startswith("sqlite:///") or "://" not in raw):
        return
    try:
        environ[ENV] = store_url(raw).raw
    except StoreError:
        return


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
    usage = "use sqlite:///PATH/jobs.db or postgresql://USER:PASSWORD@HOST:PORT/DB"
    if "://" not in raw:
        if looks_like_keywords(raw):  # a libpq keyword string: never a file name (it would be named with the password)
            pairs = keyword_pairs(raw)
            instead = f"write it as {_keywords_as_url(pairs)}" if pairs else usage
            raise StoreError(f"{ENV}={mask_keywords(raw)} is a libpq keyword string, not a store URL: {instead}")
        return sqlite_url(raw)  # a plain path
    try:
        parts = split_url(raw)
    except UrlError as exc:
        raise StoreError(f"{ENV}={mask_url(raw)} cannot be read ({exc}): {usage}") from None
    misnamed = [k for k, _ in parts.query if k != k.lower() and k.lower() in LIBPQ_KEYWORDS]
    if misnamed:  # libpq's names are lower-case: `?PASSWORD=` is refused by the driver with a traceback
        raise StoreError(f"{ENV}={parts.masked} has the query parameter {misnamed[0]}, which libpq does not know: "
                         f"write its name in lower case ({misnamed[0].lower()}=...)")
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
