"""The connection under the job store: SQLite or PostgreSQL (jobs.dialect), one lock, its schema current.

Any number of processes read and write at once (SQLite's WAL, or the server); one connection is safe
across threads (one lock). Opening brings the schema to the current version where it may
(jobs.schema). `JobStore` holds one and gives it to its parts (jobs.metric_tables, jobs.requeues).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dlguide_core.jobs import dialect, schema
from dlguide_core.jobs.store_url import StoreUrl, store_url


class Database:
    """One connection to the store at `url` (a URL, a SQLite file, or None: DLGUIDE_STORE_URL)."""

    def __init__(self, url: str | Path | StoreUrl | None = None, *, upgrade: bool = False) -> None:
        self.url = store_url(url)
        self._backend = dialect.connect(self.url)
        self.path = self._backend.path  # the SQLite file; None on a server
        self._lock = threading.RLock()
        try:
            self.schema_version = schema.ensure(self._backend, upgrade=upgrade)
        except BaseException:
            self._backend.close()
            raise

    @property
    def backend(self) -> str:
        return self._backend.name

    @property
    def read_only(self) -> bool:
        return self._backend.read_only

    def close(self) -> None:
        with self._lock:
            self._backend.close()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction (`?` placeholders on both backends)."""
        with self._lock, self._backend.transaction() as db:
            yield db

    def lock_claims(self, tx: Any) -> None:
        """Inside transaction `tx`: hold the queue's claims until it ends (one dispatcher at a time)."""
        self._backend.lock_claims(tx)

    def rows(self, sql: str, args: tuple = ()) -> list:
        with self._lock:
            return self._backend.rows(sql, args)
