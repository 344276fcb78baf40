"""Dispatching the queue without waiting for it: a page that queues a job hands the launch to a worker thread
and answers at once; the job's status in the store says what came of it (running, or failed with why)."""

from __future__ import annotations

import logging
import threading

from dlguide_core.errors import DlguideError
from dlguide_core.jobs import queue
from dlguide_core.jobs.store import JobStore

_log = logging.getLogger(__name__)
_dispatching = threading.Lock()  # one dispatch at a time per process: a second would find nothing to claim


def _dispatch(store: JobStore) -> None:
    try:
        queue.dispatch(store)
    except (DlguideError, OSError):  # an unreadable store: whoever reads it next says so
        _log.exception("dispatching queued jobs failed")
    finally:
        _dispatching.release()


def dispatch_in_background(store: JobStore) -> threading.Thread | None:
    """Start queued jobs that fit (queue.dispatch) on a worker thread; None when a dispatch is already under way
    (it claims whatever is queued, this job included, or the next look at the queue does)."""
    if not _dispatching.acquire(blocking=False):
        return None
    thread = threading.Thread(target=_dispatch, args=(store,), name="dlguide-dispatch", daemon=True)
    thread.start()
    return thread
