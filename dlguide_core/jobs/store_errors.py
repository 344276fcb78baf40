"""One clear line for each way a SQLite job store's file or folder can be unusable.

What went wrong, where, and what to do: a read-only folder or file, a full disk, a file that is
not a database, DLGUIDE_HOME pointing at a file. Nothing is written when any of these is raised.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from dlguide_core.errors import StoreError


def writable(path: Path) -> bool:
    """Whether this process may write `path` and the folder it is in (a read-only mount counts,
    for root too: access() answers EROFS)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def check_folder(folder: Path) -> None:
    """A new store's folder must be a writable folder."""
    if folder.exists() and not folder.is_dir():
        raise StoreError(f"{folder} is a file, not a folder: point DLGUIDE_HOME (or DLGUIDE_STORE_URL) at a folder")
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise read_only(folder / "jobs.db")


def read_only(path: Path) -> StoreError:
    return StoreError(f"the job store {path} is read-only (listing and showing jobs still work): "
                      "make its folder writable or point DLGUIDE_HOME at a writable folder")


def no_space(path: Path) -> StoreError:
    return StoreError(f"no space left on the device holding {path}: free some space there and retry; "
                      "nothing was written")


def from_sqlite(exc: sqlite3.DatabaseError, path: Path, action: str) -> StoreError:
    text = str(exc)
    if "full" in text or getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return no_space(path)
    if "readonly" in text or "read-only" in text:
        return read_only(path)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return StoreError(f"the job store {path} stayed locked by another process for 30 s ({action}); retry")
    if "unable to open" in text:
        return StoreError(f"cannot open the job store {path} ({text}): check that its folder exists and "
                          "is readable")
    return StoreError(f"{path} is not a readable job store ({text}): move it aside (each job's folder "
                      "keeps its checkpoint and log) or restore a backup (jobs.db.bak-v*)")


def from_os(exc: OSError, path: Path) -> StoreError:
    if exc.errno == errno.ENOSPC:
        return no_space(path)
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return read_only(path)
    return StoreError(f"cannot use the job store {path}: {exc.strerror or exc}")
