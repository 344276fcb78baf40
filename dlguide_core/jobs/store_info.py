"""What `store info` reports, read without writing: backend, masked URL, schema version, job count."""

from __future__ import annotations

from typing import TypedDict

from dlguide_core.jobs import dialect, schema
from dlguide_core.jobs.store_url import store_url


class StoreInfo(TypedDict):
    """`store info --json`."""

    backend: str  # "sqlite" or "postgresql"
    url: str  # its password masked
    schema_version: int  # 0: no store there yet
    jobs: int


def describe(url: str | None = None) -> StoreInfo:
    found = store_url(url)
    if found.path is not None and not found.path.is_file():  # nothing to open, and nothing created
        return StoreInfo(backend=found.backend, url=found.masked, schema_version=0, jobs=0)
    backend = dialect.connect(found)
    try:
        version = schema.version_of(backend)
        jobs = backend.rows("SELECT count(*) FROM jobs")[0][0] if version else 0
    finally:
        backend.close()
    return StoreInfo(backend=found.backend, url=found.masked, schema_version=version, jobs=int(jobs))
