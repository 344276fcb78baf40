"""The job process's sink: streams a running job's metrics into the store and polls its cancel flag.

The store may be away for a while (a PostgreSQL restart, a full disk): the sink then keeps the
job's steps in memory, up to MAX_PENDING_STEPS (the oldest are dropped past that, and counted),
and its other writes (plan, epochs, checkpoints) in order, and retries each flush; the training
step never fails because of the store.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlguide_core.errors import StoreError
from dlguide_core.jobs import liveness
from dlguide_core.jobs.store import JobStore, job_dir, open_store
from dlguide_core.jobs.store_url import StoreUrl
from dlguide_core.training.sinks import EpochMetrics, NullSink

MAX_PENDING_STEPS = 100_000  # about 3 hours of steps at 10 steps/s; ~20 MB of rows
CLOSE_RETRY_S = 60.0  # how long a finishing job keeps retrying a store that is away


def retry_while_away(action: Callable[[], Any], seconds: float = CLOSE_RETRY_S) -> Any:
    """`action()`, retried every second while the store is away, for up to `seconds` (then its error)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return action()
        except StoreError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1.0)


class StoreSink(NullSink):
    """Streams a running job's metrics into the store without slowing the loop.

    `on_step` only appends to a deque; a writer thread commits the batch every
    `flush_s` (one transaction, so a reader sees a step within about flush_s) and
    polls the cancel flag, which `should_stop` then reads from memory.
    """

    def __init__(self, url: str | Path | StoreUrl | None, job_id: str, flush_s: float = 0.25,
                 max_pending: int = MAX_PENDING_STEPS) -> None:
        self.job_id, self.flush_s, self.max_pending = job_id, flush_s, max_pending
        self.store = open_store(url)  # this thread's connection (epochs, checkpoints)
        self._pending: deque[tuple] = deque()  # steps from on_step, not yet taken by a flush
        # What is still to write, in the order it happened: lists of step rows, and the other
        # writes (trim, plan, epochs, checkpoints) as calls; kept while the store is away.
        self._queue: deque[list[tuple] | Callable[[JobStore], None]] = deque()
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._closing = threading.Event()
        self.stop_reason: str | None = None
        self.dropped = 0  # steps lost to a store away for longer than max_pending steps
        self._outage: str | None = None
        self._writer = threading.Thread(target=self._write_loop, args=(self.store.url,), name="dlguide-store-sink",
                                        daemon=True)
        self._writer.start()

    def on_start(self, *, total_steps: int | None, epochs: int, class_names: tuple[str, ...] = (),
                 start_step: int | None = None, start_epoch: int | None = None) -> None:
        # Trim here, in the process that restored the checkpoint: the store's checkpoint record can
        # lag the file by one save (a kill between the file's rename and the record's update).
        if start_step is not None and start_epoch is not None:
            self._write(lambda s: s.trim_metrics(self.job_id, start_step, start_epoch))
        self._write(lambda s: s.set_plan(self.job_id, total_steps, epochs, class_names))

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        self._pending.append((self.job_id, step, epoch, loss, lr, images_per_s, time.time(),
                              json.dumps(extra) if extra else None))

    def on_epoch(self, epoch: int, metrics: EpochMetrics) -> None:
        self._write(lambda s: s.add_epoch(self.job_id, epoch, metrics))

    def flush(self) -> None:
        self.flush_now()

    def on_checkpoint(self, path: Path, *, step: int | None = None, epoch: int | None = None) -> None:
        self._write(lambda s: s.set_checkpoint(self.job_id, path, step, epoch))

    def on_skipped_files(self, count: int, examples: tuple[str, ...]) -> None:
        self.store.set_skipped_files(self.job_id, count, examples)  # `jobs show --json` -> skipped_files

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, reason: str | None = None) -> None:
        """From a signal handler or the cancel poll: the loop checkpoints and returns."""
        self.stop_reason = self.stop_reason or reason
        self._stop.set()

    def cancel_was_requested(self) -> bool:
        """The store's cancel flag, read now (the final status of a stop by signal asks it)."""
        return self.store.cancel_requested(self.job_id)

    def _write(self, action: Callable[[JobStore], None]) -> None:
        """After every step reported so far, in order (queued while the store is away)."""
        with self._flush_lock:
            self._take_pending()
            self._queue.append(action)
        self.flush_now()

    def _take_pending(self) -> None:
        """Move the reported steps into the queue (under the flush lock), keeping at most max_pending."""
        rows = []
        while self._pending:
            rows.append(self._pending.popleft())
        if rows and self._queue and isinstance(self._queue[-1], list):
            self._queue[-1].extend(rows)
        elif rows:
            self._queue.append(rows)
        excess = self._unsaved_steps() - self.max_pending
        for item in self._queue:  # the bound: the oldest steps go first
            if excess <= 0:
                break
            if isinstance(item, list):
                cut = min(excess, len(item))
                del item[:cut]
                self.dropped, excess = self.dropped + cut, excess - cut

    def _unsaved_steps(self) -> int:
        return sum(len(item) for item in self._queue if isinstance(item, list))

    def flush_now(self, store: JobStore | None = None) -> bool:
        """Write everything queued, in order; False (all kept for a retry) while the store is away.

        One lock over take + commit: when the loop's flush() returns, rows the writer thread had
        already taken are committed too, not still in flight. While the store is away, the training
        loop's calls (no `store`) return at once: the writer thread retries, the loop never waits."""
        if store is None and self._outage is not None:
            return False
        store = store or self.store
        with self._flush_lock:
            self._take_pending()
            try:
                while self._queue:
                    item = self._queue[0]
                    if isinstance(item, list):
                        store.add_steps(item)
                    else:
                        item(store)
                    self._queue.popleft()
            except StoreError as exc:
                self._report_outage(str(exc))
                return False
            self._report_outage(None)
            return True

    def _report_outage(self, problem: str | None) -> None:
        """One line in the job's log when the store goes away, and one when it is back."""
        if problem and self._outage is None:
            print(f"store: {problem}; keeping up to {self.max_pending} steps in memory and retrying",
                  file=sys.stderr, flush=True)
        elif problem is None and self._outage is not None:
            lost = f" ({self.dropped} oldest steps dropped)" if self.dropped else ""
            print(f"store: reachable again; buffered metrics written{lost}", file=sys.stderr, flush=True)
        self._outage = problem

    def close(self) -> None:
        self._closing.set()
        self._writer.join(timeout=30)
        deadline = time.monotonic() + CLOSE_RETRY_S
        while not self.flush_now(self.store) and time.monotonic() < deadline:
            time.sleep(1.0)
        if self._queue:
            others = sum(1 for item in self._queue if not isinstance(item, list))
            print(f"store: gave up after {CLOSE_RETRY_S:.0f} s; {self._unsaved_steps()} steps and {others} "
                  f"other records of job {self.job_id} were not written", file=sys.stderr, flush=True)
        self.store.close()

    def _write_loop(self, url: StoreUrl) -> None:
        store = open_store(url)
        beat = 0.0
        try:
            while not self._closing.wait(self.flush_s):
                if self.flush_now(store) and not self._stop.is_set() and self._cancel_requested(store):
                    self.request_stop("cancel")
                if time.monotonic() - beat >= liveness.HEARTBEAT_S:  # seen by readers that cannot see our pid
                    liveness.touch_heartbeat(job_dir(self.job_id))
                    beat = time.monotonic()
        finally:
            store.close()

    def _cancel_requested(self, store: JobStore) -> bool:
        try:
            return store.cancel_requested(self.job_id)
        except StoreError:
            return False
