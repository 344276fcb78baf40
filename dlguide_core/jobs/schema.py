"""The job store's schema, versioned: numbered migrations and the one place that applies them.

v1 is the store as the first release created it (no version record: a `jobs` table alone means v1).
Each later version is a list of statements applied in one transaction with its `schema_version`
row. A SQLite store upgrades itself when opened, after copying itself to `jobs.db.bak-v<N>`; a
PostgreSQL store upgrades only through `python -m dlguide_core store upgrade` (until then every
client says so); an empty database is created at the current version. A store newer than this code
is refused before anything is written.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from dlguide_core.errors import StoreError
from dlguide_core.jobs import store_errors

V1 = (
    """CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, recipe TEXT NOT NULL, framework TEXT NOT NULL, config TEXT NOT NULL,
    status TEXT NOT NULL, pid INTEGER, pid_started REAL, slot INTEGER,
    created REAL NOT NULL, started REAL, finished REAL, error TEXT,
    checkpoint TEXT, checkpoint_step INTEGER, checkpoint_epoch INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0, total_steps INTEGER, epochs INTEGER,
    class_names TEXT, attempts INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS steps (
    job_id TEXT NOT NULL, step INTEGER NOT NULL, epoch INTEGER NOT NULL, loss REAL, lr REAL,
    images_per_s REAL, time REAL NOT NULL, extra TEXT, PRIMARY KEY (job_id, step)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS epochs (
    job_id TEXT NOT NULL, epoch INTEGER NOT NULL, train_loss REAL, val_loss REAL, top1 REAL, top5 REAL,
    time REAL NOT NULL, extra TEXT, PRIMARY KEY (job_id, epoch)) WITHOUT ROWID""",
)
V2 = tuple(f"ALTER TABLE jobs ADD COLUMN {column}" for column in (
    "executor TEXT NOT NULL DEFAULT 'local'", "external_id TEXT", "owner TEXT", "host TEXT", "boot_id TEXT",
    "name TEXT", "tags TEXT", "skipped_files TEXT"))
# v3: a scheduler's requeues of the same job (Slurm: preemption, node failure), and what the last one stopped.
V3 = ("ALTER TABLE jobs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0",
      "ALTER TABLE jobs ADD COLUMN restart_note TEXT")
MIGRATIONS: dict[int, tuple[str, ...]] = {1: V1, 2: V2, 3: V3}
SCHEMA_VERSION = max(MIGRATIONS)
VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied REAL NOT NULL)"
UPGRADE_COMMAND = "python -m dlguide_core store upgrade"
_UPGRADE_LOCK = 0x646C6776  # PostgreSQL advisory lock id of upgrades


def version_of(backend: Any, db: Any = None) -> int:
    """0: empty; 1: the first release's tables (no version record); else the highest migration applied.
    Read through `db` (an open transaction) when given."""
    def query(sql: str) -> list:
        return db.execute(sql).fetchall() if db is not None else backend.rows(sql)

    tables = {r[0] for r in query(backend.TABLES_SQL)}
    if "schema_version" in tables:
        return int(query("SELECT max(version) FROM schema_version")[0][0] or 1)
    return 1 if "jobs" in tables else 0


def ensure(backend: Any, *, upgrade: bool = False) -> int:
    """Bring the store to SCHEMA_VERSION where allowed; returns the version it is at.

    A read-only store is read at the version it has (the code reads every version's rows)."""
    version = version_of(backend)
    where = backend.url.masked
    if version > SCHEMA_VERSION:
        raise StoreError(f"the job store {where} is at schema v{version}, newer than this dlguide's "
                         f"v{SCHEMA_VERSION}: use a newer dlguide with it; nothing was written")
    if version == SCHEMA_VERSION or (backend.read_only and version > 0):
        return version
    if backend.name == "postgresql" and version > 0 and not upgrade:
        raise StoreError(f"the job store {where} is at schema v{version}; this dlguide needs "
                         f"v{SCHEMA_VERSION}: run `{UPGRADE_COMMAND}` (with the same DLGUIDE_STORE_URL)")
    if backend.name == "sqlite" and version > 0:
        _backup(backend, version)
    return _migrate(backend)


def _backup(backend: Any, version: int) -> None:
    """A consistent copy (SQLite's backup API, WAL included) beside the file, before the upgrade."""
    target = backend.path.with_name(f"{backend.path.name}.bak-v{version}")
    try:
        copy = sqlite3.connect(target)
        try:
            backend.conn.backup(copy)
        finally:
            copy.close()
    except sqlite3.DatabaseError as exc:
        target.unlink(missing_ok=True)
        raise store_errors.from_sqlite(exc, target, "back up") from None


def _migrate(backend: Any) -> int:
    """Every missing migration in one transaction, re-read under the lock (another process may
    have upgraded meanwhile)."""
    with backend.transaction() as db:
        if backend.name == "postgresql":
            db.execute("SELECT pg_advisory_xact_lock(?)", (_UPGRADE_LOCK,))
        version = version_of(backend, db)
        db.execute(backend.translate(VERSION_TABLE))
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[number]:
                db.execute(backend.translate(statement))
            db.execute("INSERT INTO schema_version (version, applied) VALUES (?, ?)", (number, time.time()))
    return SCHEMA_VERSION
