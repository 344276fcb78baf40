"""asyncio.run in a thread of its own, for tests of the ASGI middleware (web/): the browser tests' Playwright (sync
API) keeps an event loop running in a pytest worker's main thread for the rest of the session, where asyncio.run
refuses to start."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def run_in_own_loop(coroutine_function: Callable[[], Awaitable[T]], timeout: float = 120) -> T:
    """Run `coroutine_function()` to its end in a new loop on a new thread; its result, or its exception raised here."""
    results: list[T] = []
    failures: list[BaseException] = []

    async def main() -> T:
        return await coroutine_function()

    def target() -> None:
        try:
            results.append(asyncio.run(main()))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            failures.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=timeout)
    assert not thread.is_alive(), "the loop did not finish"
    if failures:
        raise failures[0]
    return results[0]
