"""The job process's sink: streams a running job's metrics into the store and polls its cancel flag."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from dlguide_core.jobs.store import JobStore
from dlguide_core.training.sinks import NullSink


class StoreSink(NullSink):
    """Streams a running job's metrics into the store without slowing the loop.

    `on_step` only appends to a deque; a writer thread commits the batch every
    `flush_s` (one transaction, so a reader sees a step within about flush_s) and
    polls the cancel flag, which `should_stop` then reads from memory.
    """

    def __init__(self, store_path: Path, job_id: str, flush_s: float = 0.25) -> None:
        self.job_id, self.flush_s = job_id, flush_s
        self.store = JobStore(store_path)  # this thread's connection (epochs, checkpoints)
        self._pending: deque[tuple] = deque()
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._closing = threading.Event()
        self.stop_reason: str | None = None
        self._writer = threading.Thread(target=self._write_loop, args=(store_path,), name="dlguide-store-sink",
                                        daemon=True)
        self._writer.start()

    def on_start(self, *, total_steps: int | None, epochs: int, class_names: tuple[str, ...] = (),
                 start_step: int | None = None, start_epoch: int | None = None) -> None:
        # Trim here, in the process that restored the checkpoint: the store's checkpoint record can
        # lag the file by one save (a kill between the file's rename and the record's update).
        if start_step is not None and start_epoch is not None:
            self.store.trim_metrics(self.job_id, start_step, start_epoch)
        self.store.set_plan(self.job_id, total_steps, epochs, class_names)

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        self._pending.append((self.job_id, step, epoch, loss, lr, images_per_s, time.time(),
                              json.dumps(extra) if extra else None))

    def on_epoch(self, epoch: int, metrics: dict[str, Any]) -> None:
        self.flush_now()
        self.store.add_epoch(self.job_id, epoch, metrics)

    def flush(self) -> None:
        self.flush_now()

    def on_checkpoint(self, path: Path, *, step: int | None = None, epoch: int | None = None) -> None:
        self.flush_now()
        self.store.set_checkpoint(self.job_id, path, step, epoch)

    def on_skipped_files(self, count: int, examples: tuple[str, ...]) -> None:
        self.store.set_skipped_files(self.job_id, count, examples)  # `jobs show --json` -> skipped_files

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, reason: str | None = None) -> None:
        """From a signal handler or the cancel poll: the loop checkpoints and returns."""
        self.stop_reason = self.stop_reason or reason
        self._stop.set()

    def flush_now(self, store: JobStore | None = None) -> None:
        # One lock over pop + commit: when the loop's flush() returns, rows the writer thread
        # had already taken are committed too, not still in flight.
        with self._flush_lock:
            rows = []
            while self._pending:
                rows.append(self._pending.popleft())
            (store or self.store).add_steps(rows)

    def close(self) -> None:
        self._closing.set()
        self._writer.join(timeout=30)
        self.flush_now()
        self.store.close()

    def _write_loop(self, store_path: Path) -> None:
        store = JobStore(store_path)
        try:
            while not self._closing.wait(self.flush_s):
                self.flush_now(store)
                if not self._stop.is_set() and store.cancel_requested(self.job_id):
                    self.request_stop("cancel")
        finally:
            store.close()
