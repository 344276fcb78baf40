"""A server's image work (decode, preprocess, top-k, the pictures a page shows) on a few long-lived threads.

Streamlit runs every script run, a fragment's included, in a new thread, and torch's first operations in a new
thread pay a set-up of their own (its per-thread state, OpenMP's team for that thread). Measured on the 2-core box
(bench/bench_image_threads.py): a booth photo's decode, preprocess, model view and two JPEG encodes took 15-17 ms of
CPU in a fresh thread each time against 8.4 ms on a thread that lives on, per photo, every photo. So the booth runs
that work here, on `size()` threads (one per physical core: a crowd's photos are worked on side by side, never
one at a time behind a lock), created on first use and kept for the life of the process.

Nothing here sets thread counts (dlguide_core.threads decides those for the process).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def size() -> int:
    """How many image threads a process keeps: one per physical core."""
    from dlguide_core.threads import physical_cores

    return max(1, physical_cores())


def _thread_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=size(), thread_name_prefix="image-work")
        return _pool


def run(work: Callable[..., T], *args: object) -> T:
    """`work(*args)` on an image thread; its result, or its exception raised here. The caller waits: it is the
    visitor's own script run, which has nothing else to do meanwhile."""
    return _thread_pool().submit(work, *args).result()
