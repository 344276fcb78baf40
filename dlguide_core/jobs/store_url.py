"""Where the job store lives: DLGUIDE_STORE_URL, read once per open and never shown with its password.

Unset: `sqlite:///$DLGUIDE_HOME/jobs.db` (one machine). `postgresql://USER:PASSWORD@HOST:PORT/DB`:
a server that several hosts share (DLGUIDE_HOME then on a shared filesystem, for the job folders).
Job processes inherit the URL through their environment, never their argv; everything shown to
a person uses `masked` (`postgresql://user:***@host:port/db`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from dlguide_core import settings
from dlguide_core.errors import StoreError

ENV = "DLGUIDE_STORE_URL"
DB_FILE = "jobs.db"  # in DLGUIDE_HOME, beside the `jobs/` folder of job folders
_PASSWORD = re.compile(r"(://[^:/@\s]*:)([^@\s]*)(@)")


def mask(text: str) -> str:
    """`text` with the password of every URL in it replaced by ***."""
    return _PASSWORD.sub(r"\1***\3", text)


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
        return mask(self.raw)

    @property
    def password(self) -> str | None:
        return urlsplit(self.raw).password if self.backend == "postgresql" else None

    def __repr__(self) -> str:
        return f"StoreUrl({self.masked!r})"

    __str__ = __repr__


def sqlite_url(path: str | Path) -> StoreUrl:
    return StoreUrl(f"sqlite://{Path(path).expanduser().resolve()}")


def store_url(url: str | Path | StoreUrl | None = None) -> StoreUrl:
    """The store to open: `url` (a URL, or a SQLite file's path), else DLGUIDE_STORE_URL, else
    jobs.db in DLGUIDE_HOME. A URL of another kind is one clear error."""
    if isinstance(url, StoreUrl):
        return url
    if isinstance(url, Path):
        return sqlite_url(url)
    raw = (url if url is not None else os.environ.get(ENV, "")).strip()
    if not raw:
        return sqlite_url(settings.home() / DB_FILE)
    if raw.startswith("sqlite:///"):
        return sqlite_url(raw.removeprefix("sqlite://"))
    parts = urlsplit(raw)
    if parts.scheme in ("postgresql", "postgres") and parts.hostname and parts.path.strip("/"):
        return StoreUrl("postgresql" + raw[len(parts.scheme):])
    if "://" not in raw:
        return sqlite_url(raw)  # a plain path
    raise StoreError(f"{ENV}={mask(raw)} is not a store URL: use sqlite:///PATH/jobs.db or "
                     "postgresql://USER:PASSWORD@HOST:PORT/DB")
