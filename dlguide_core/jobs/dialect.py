"""The two SQL backends under the job store, behind one small interface (jobs.database uses it).

Queries are written once, in the SQL both speak (`?` placeholders, `INSERT ... ON CONFLICT DO
UPDATE`); `Postgres` rewrites the placeholders and the few DDL words that differ (REAL is 4 bytes
there: timestamps and step times need DOUBLE PRECISION). psycopg is imported only for a
postgresql URL, so `jobs list` on SQLite never pays for it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dlguide_core.errors import StoreError
from dlguide_core.jobs.store_url import StoreUrl, mask

CLAIM_LOCK = 0x646C6775  # PostgreSQL advisory lock id of the queue's claims ("dlgu")
CONNECT_TIMEOUT_S = 5


def upsert(table: str, columns: Sequence[str], key: Sequence[str]) -> str:
    """INSERT that replaces the row with the same `key` (both backends)."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}")


class Sqlite:
    """One file in WAL mode; write transactions take the lock up front (BEGIN IMMEDIATE)."""

    name = "sqlite"
    TABLES_SQL = "SELECT name FROM sqlite_master WHERE type = 'table'"

    def __init__(self, url: StoreUrl) -> None:
        self.url, self.path = url, url.path
        self.read_only = False
        self.conn = self._open()

    def _open(self) -> sqlite3.Connection:
        from dlguide_core.jobs import store_errors

        exists = self.path.is_file()
        if not exists:
            store_errors.check_folder(self.path.parent)
        self.read_only = exists and not store_errors.writable(self.path)
        target = f"file:{self.path}?mode=ro" if self.read_only else str(self.path)
        try:
            conn = sqlite3.connect(target, uri=self.read_only, timeout=30.0, check_same_thread=False,
                                   isolation_level=None)
            conn.row_factory = sqlite3.Row
            if not self.read_only:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a corrupt file fails here
            return conn
        except sqlite3.DatabaseError as exc:
            raise store_errors.from_sqlite(exc, self.path, "open") from None

    def translate(self, sql: str) -> str:
        return sql

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        from dlguide_core.jobs import store_errors

        if self.read_only:
            raise store_errors.read_only(self.path)
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise store_errors.from_sqlite(exc, self.path, "write") from None

    def rows(self, sql: str, args: tuple = ()) -> list:
        from dlguide_core.jobs import store_errors

        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise store_errors.from_sqlite(exc, self.path, "read") from None

    def lock_claims(self, db: Any) -> None:
        """BEGIN IMMEDIATE already serialises every writer."""

    def close(self) -> None:
        self.conn.close()


class Row(tuple):
    """A PostgreSQL row read like sqlite3.Row: by position, by column name, and `dict(row)`."""

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._index[key] if isinstance(key, str) else key)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: Any) -> Any:
    index = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: Row(values, index)


class _PgTx:
    """The transaction's handle: `?` placeholders, as the queries are written."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.conn.execute(_placeholders(sql), tuple(args) or None)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(_placeholders(sql), rows)


def _placeholders(sql: str) -> str:
    return sql.replace("?", "%s")


_DDL = ((re.compile(r"\bREAL\b"), "DOUBLE PRECISION"), (re.compile(r"\bINTEGER\b"), "BIGINT"),
        (re.compile(r"\s*WITHOUT ROWID"), ""))


class Postgres:
    """One psycopg connection (autocommit; explicit transactions), re-established after an outage."""

    name = "postgresql"
    TABLES_SQL = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    read_only = False

    def __init__(self, url: StoreUrl) -> None:
        import psycopg

        self.url, self.path = url, None
        self._errors = (psycopg.OperationalError, psycopg.InterfaceError)
        self.conn: Any = None
        self._connection()

    def _connection(self) -> Any:
        import psycopg

        if self.conn is None or self.conn.closed or self.conn.broken:
            try:
                self.conn = psycopg.connect(self.url.raw, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                            row_factory=_row_factory)
            except self._errors as exc:
                raise self.unavailable(exc) from None
        return self.conn

    def unavailable(self, exc: BaseException) -> StoreError:
        detail = mask(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        if self.url.password:
            detail = detail.replace(self.url.password, "***")
        return StoreError(f"the job store at {self.url.masked} is unreachable ({detail}); "
                          "start the server or fix DLGUIDE_STORE_URL")

    def translate(self, sql: str) -> str:
        for pattern, word in _DDL:
            sql = pattern.sub(word, sql)
        return sql

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        conn = self._connection()
        try:
            with conn.transaction():
                yield _PgTx(conn)
        except self._errors as exc:
            raise self.unavailable(exc) from None

    def rows(self, sql: str, args: tuple = ()) -> list:
        for attempt in (1, 2):  # a connection the server dropped is re-made once, at once
            conn = self._connection()
            try:
                return conn.execute(_placeholders(sql), args or None).fetchall()
            except self._errors as exc:
                if attempt == 2 or not conn.broken:
                    raise self.unavailable(exc) from None
        raise AssertionError("unreachable")

    def lock_claims(self, db: _PgTx) -> None:
        """Claims take turns (until commit), so two dispatchers never count the same free devices."""
        db.execute("SELECT pg_advisory_xact_lock(?)", (CLAIM_LOCK,))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def connect(url: StoreUrl) -> Sqlite | Postgres:
    return Sqlite(url) if url.backend == "sqlite" else Postgres(url)
