"""Which jobs are running on this machine right now: what a benchmark reports as having run beside it
(inference.activity), read from the job store only when one exists."""

from __future__ import annotations

import socket

from dlguide_core.errors import DlguideError


def running_jobs_here() -> frozenset[str]:
    """Ids of the jobs running on this machine (local jobs, or a scheduler's job whose process is here); empty
    when no job store exists yet (none is created) or it cannot be read."""
    from dlguide_core.jobs.store import open_store
    from dlguide_core.jobs.store_url import store_url

    try:
        url = store_url()
    except DlguideError:  # a DLGUIDE_STORE_URL that cannot be read: as a store that cannot be opened
        return frozenset()
    if url.path is not None and not url.path.is_file():
        return frozenset()
    here = socket.gethostname()
    try:
        jobs = open_store(url).list_jobs()
    except (DlguideError, OSError):
        return frozenset()
    return frozenset(j.id for j in jobs
                     if j.status == "running" and (j.executor == "local" or j.host in (None, here)))
