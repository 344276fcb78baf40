"""TensorBoard event files of a training run, written with the `tensorboard` package's own writer.

The tags are the numbers the app shows: per step `train/loss`, `train/lr`, `train/images_per_s`
(and `train/accuracy` in percent where a recipe records it), per epoch `epoch/train_loss`,
`epoch/val_loss`, `epoch/top1`, `epoch/top5` (step = the 0-based epoch).

A running job writes through `TensorBoardSink`, which, like the store's sink, only appends to a
queue in the training step; a background thread writes it every `flush_s`. Where the files of a
job live, and how they are rebuilt from the job store, is jobs.tensorboard_export.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dlguide_core.training.sinks import STEP_EXTRAS, EpochMetrics, NullSink

STEP_TAGS = {"loss": "train/loss", "lr": "train/lr", "images_per_s": "train/images_per_s"}
EXTRA_TAGS = {column: f"train/{column}" for column, _, _ in STEP_EXTRAS}
EPOCH_TAGS = {"train_loss": "epoch/train_loss", "val_loss": "epoch/val_loss", "top1": "epoch/top1",
              "top5": "epoch/top5"}


def _tensorboard_without_tensorflow() -> None:
    # tensorboard.compat resolves its `tf` lazily to TensorFlow whenever TensorFlow is installed: 4 s
    # and a GB of imports to append records to a file. A module named tensorboard.compat.notf is
    # TensorBoard's own switch to its built-in stub (what its TF-free builds ship).
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))


def open_writer(logdir: Path) -> Any:
    """A `tensorboard.summary.Writer` appending to a new event file in `logdir`."""
    _tensorboard_without_tensorflow()
    from tensorboard.summary import DirectoryOutput, Writer

    logdir.mkdir(parents=True, exist_ok=True)
    return Writer(DirectoryOutput(str(logdir)))


def remove_event_files(logdir: Path) -> None:
    for path in logdir.glob("events.out.tfevents.*"):
        path.unlink(missing_ok=True)


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def write_step(writer: Any, row: dict[str, Any]) -> None:
    """One step row (the store's columns: loss, lr, images_per_s, the STEP_EXTRAS ones) as scalars at its step."""
    for column, tag in (*STEP_TAGS.items(), *EXTRA_TAGS.items()):
        value = _finite(row.get(column))
        if value is not None:
            writer.add_scalar(tag, value, step=int(row["step"]), wall_time=row.get("time"))


def write_epoch(writer: Any, epoch: int, metrics: Mapping[str, object], wall_time: float | None = None) -> None:
    """One epoch's metrics: the four known ones, then any other number (lr, ...) as epoch/<name>."""
    for key, value in metrics.items():
        value = _finite(value)
        if value is not None and key not in ("epoch", "time"):
            writer.add_scalar(EPOCH_TAGS.get(key, f"epoch/{key}"), value, step=int(epoch), wall_time=wall_time)


class TensorBoardSink(NullSink):
    """Mirrors a running job into its event files without adding work to the training step.

    `on_start` (each run, a resume too) calls `replay(logdir)`, which rewrites the event files from
    what is recorded so far (jobs.tensorboard_export.job_sink: from the job store, already trimmed
    to where this run starts), so they never hold steps the run is about to redo. A writing error
    is reported once and never reaches the loop."""

    def __init__(self, logdir: Path, replay: Callable[[Path], Any], flush_s: float = 2.0) -> None:
        self.logdir, self.replay = logdir, replay
        self.flush_s = flush_s
        self._pending: deque[tuple] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._writer = None
        self.failed: str | None = None
        self._thread = threading.Thread(target=self._loop, name="dlguide-tensorboard", daemon=True)
        self._thread.start()

    def on_start(self, **kwargs: Any) -> None:
        with self._lock:
            self._guard(self._reopen)

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        self._pending.append(("step", step, loss, lr, images_per_s, extra, time.time()))

    def on_epoch(self, epoch: int, metrics: EpochMetrics) -> None:
        self._pending.append(("epoch", epoch, metrics, time.time()))
        self.flush()

    def flush(self) -> None:
        with self._lock:
            self._guard(self._drain)
            self._guard(lambda: self._writer and self._writer.flush())

    def close(self) -> None:
        self._closing.set()
        self._thread.join(timeout=30)
        with self._lock:
            self._guard(self._drain)
            if self._writer is not None:
                self._guard(self._writer.close)
                self._writer = None

    def _reopen(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self.replay(self.logdir)  # what is recorded now
        self._writer = open_writer(self.logdir)

    def _drain(self) -> None:
        if self._writer is None:
            self._writer = open_writer(self.logdir)
        while self._pending:
            item = self._pending.popleft()
            if item[0] == "step":
                _, step, loss, lr, ips, extra, at = item
                row = {"step": step, "loss": loss, "lr": lr, "images_per_s": ips, "time": at}
                for column, key, scale in STEP_EXTRAS:
                    value = _finite(extra.get(key))
                    row[column] = None if value is None else value * scale
                write_step(self._writer, row)
            else:
                _, epoch, metrics, at = item
                write_epoch(self._writer, epoch, metrics, at)

    def _loop(self) -> None:
        while not self._closing.wait(self.flush_s):
            with self._lock:
                self._guard(self._drain)

    def _guard(self, action: Callable[[], None]) -> None:
        if self.failed:
            self._pending.clear()
            return
        try:
            action()
        except Exception as exc:  # TensorBoard files are a mirror: never fail the training run for them
            self.failed = f"{type(exc).__name__}: {exc}"
            print(f"TensorBoard event files stopped: {self.failed}", file=sys.stderr, flush=True)
