"""The two SQL backends under the job store, behind one small interface (jobs.database uses it).

Queries are written once, in the SQL both speak (`?` placeholders, `INSERT ... ON CONFLICT DO
UPDATE`); `Postgres` rewrites the placeholders and the few DDL words that differ (REAL is 4 bytes
there: timestamps and step times need DOUBLE PRECISION). psycopg is imported only for a
postgresql URL, so `jobs list` on SQLite never pays for it.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

from dlguide_core.errors import StoreError, first_line
from dlguide_core.jobs import store_errors
from dlguide_core.jobs.store_url import StoreUrl

CLAIM_LOCK = 0x646C6775  # PostgreSQL advisory lock id of the queue's claims ("dlgu")
CONNECT_TIMEOUT_S = 5


def upsert(table: str, columns: Sequence[str], key: Sequence[str], *, replace: bool = True) -> str:
    """INSERT that replaces the row with the same `key` (or, without `replace`, keeps it); both backends."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in key)
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT ({', '.join(key)}) " + (f"DO UPDATE SET {updates}" if replace else "DO NOTHING"))


OPEN_WAIT_S = 30.0  # as long as the connection's own busy timeout


def _busy(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


class Sqlite:
    """One file in WAL mode; write transactions take the lock up front (BEGIN IMMEDIATE)."""

    name = "sqlite"
    TABLES_SQL = "SELECT name FROM sqlite_master WHERE type = 'table'"

    def __init__(self, url: StoreUrl) -> None:
        if url.path is None:
            raise ValueError(f"{url} is not a SQLite store")
        self.url, self.path = url, url.path
        self.read_only = False
        self.conn = self._open()

    def _open(self) -> sqlite3.Connection:
        exists = self.path.is_file()
        if not exists:
            store_errors.check_folder(self.path.parent)
        self.read_only = exists and not store_errors.writable(self.path)
        # Switching a file to WAL does not wait on SQLite's busy timeout: a second process (or thread) that opens
        # a store another one is creating at that instant got "database is locked" at once (2 of 40 tries with
        # three openers). It waits here instead, as long as any other lock would make it wait.
        deadline = time.monotonic() + OPEN_WAIT_S
        while True:
            try:
                return self._connect_in_wal()
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() > deadline:
                    raise store_errors.from_sqlite(exc, self.path, "open") from None
                time.sleep(0.02)
            except sqlite3.DatabaseError as exc:
                raise store_errors.from_sqlite(exc, self.path, "open") from None

    def _connect_in_wal(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            conn.row_factory = sqlite3.Row
            if not self.read_only:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across app crashes
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a corrupt file fails here
            return conn
        except BaseException:
            conn.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        def connect(target: str) -> sqlite3.Connection:
            return sqlite3.connect(target, uri=True, timeout=30.0, check_same_thread=False, isolation_level=None)

        if not self.read_only:
            return connect(str(self.path))
        try:
            conn = connect(f"file:{quote(str(self.path))}?mode=ro")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            # A WAL store closed cleanly has no -shm file, and a read-only folder cannot get one:
            # nobody can write there either, so the file is read as immutable.
            return connect(f"file:{quote(str(self.path))}?mode=ro&immutable=1")

    @staticmethod
    def translate(sql: str) -> str:
        return sql

    @contextmanager
    def transaction(self) -> Iterator[Any]:
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
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise store_errors.from_sqlite(exc, self.path, "read") from None

    def lock_claims(self, db: Any) -> None:
        """BEGIN IMMEDIATE already serialises every writer."""

    def close(self) -> None:
        self.conn.close()


class Row(tuple):
    """A PostgreSQL row read like sqlite3.Row: by position, by column name, and `dict(row)`.
    One subclass per result (`_index` on the class), so making a row costs no more than a tuple."""

    _index: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:
        return tuple.__getitem__(self, self._index[key] if type(key) is str else key)

    def keys(self) -> list[str]:
        return list(self._index)


def _row_factory(cursor: Any) -> Any:
    return type("Row", (Row,), {"_index": {c.name: i for i, c in enumerate(cursor.description or ())}})


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
    TABLES_SQL = "SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema()"
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
            except psycopg.ProgrammingError as exc:  # a URL libpq cannot read (an unknown `?Name=`): one line
                detail = first_line(self.url.hide_secrets(str(exc))) or type(exc).__name__
                raise StoreError(f"DLGUIDE_STORE_URL={self.url.masked} cannot be read ({detail}): use "
                                 "postgresql://USER:PASSWORD@HOST:PORT/DB") from None
        return self.conn

    def unavailable(self, exc: BaseException) -> StoreError:
        text = self.url.hide_secrets(str(exc))  # hidden before the line is cut (a cut one would no longer match)
        detail = first_line(text) or type(exc).__name__
        return StoreError(f"the job store at {self.url.masked} is unreachable ({detail}); "
                          "start the server or fix DLGUIDE_STORE_URL")

    @staticmethod
    def translate(sql: str) -> str:
        """DDL in PostgreSQL's words."""
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
        conn = self._connection()
        try:
            return conn.execute(_placeholders(sql), args or None, binary=True).fetchall()
        except self._errors as exc:
            if not conn.broken:
                raise self.unavailable(exc) from None
        try:  # the server dropped the connection (a restart): one new connection, at once
            return self._connection().execute(_placeholders(sql), args or None, binary=True).fetchall()
        except self._errors as exc:
            raise self.unavailable(exc) from None

    def lock_claims(self, db: _PgTx) -> None:
        """Claims take turns (until commit), so two dispatchers never count the same free devices."""
        db.execute("SELECT pg_advisory_xact_lock(?)", (CLAIM_LOCK,))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def connect(url: StoreUrl) -> Sqlite | Postgres:
    return Sqlite(url) if url.backend == "sqlite" else Postgres(url)
