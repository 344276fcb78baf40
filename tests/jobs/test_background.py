"""dlguide_core.jobs.background: a queued job is launched on a worker thread; the caller does not wait."""

from __future__ import annotations

from unittest import mock

from dlguide_core.jobs import background, queue
from dlguide_core.jobs.store import JobStore


def test_dispatch_runs_on_a_worker_thread_and_one_at_a_time() -> None:
    store = JobStore()
    release = __import__("threading").Event()
    calls = []

    def slow_dispatch(s):
        calls.append(s)
        release.wait(10)
        return []

    with mock.patch.object(queue, "dispatch", slow_dispatch):
        thread = background.dispatch_in_background(store)
        assert thread is not None and thread.is_alive()  # returned while the dispatch still runs
        assert background.dispatch_in_background(store) is None  # one at a time
        release.set()
        thread.join(10)
        again = background.dispatch_in_background(store)
        again.join(10)
    assert calls == [store, store]


def test_a_failing_dispatch_is_logged_and_frees_the_next_one(caplog) -> None:
    store = JobStore()
    with mock.patch.object(queue, "dispatch", side_effect=OSError("disk gone")):
        background.dispatch_in_background(store).join(10)
    assert "dispatching queued jobs failed" in caplog.text
    with mock.patch.object(queue, "dispatch", return_value=[]):
        assert background.dispatch_in_background(store) is not None
