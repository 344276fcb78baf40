"""How the ranks of a data-parallel run report: every rank calls the sink, only the writer rank passes on.

The writer rank is the lowest rank that holds the job record (distributed.find_writer), not
necessarily rank 0. Ranks that do not write keep only a stop flag (StopFlagSink) for signals.
"""

from __future__ import annotations

from typing import Any

import torch

from dlguide_core.training.distributed import DistEnv, all_reduce_sum
from dlguide_core.training.sinks import EpochMetrics, NullSink, TrainingSink


class StopFlagSink(NullSink):
    """The local sink of ranks that do not write: only remembers a stop request (signals)."""

    def __init__(self) -> None:
        self.stop_reason: str | None = None

    def request_stop(self, reason: str | None = None) -> None:
        self.stop_reason = self.stop_reason or reason or "request"

    def should_stop(self) -> bool:
        return self.stop_reason is not None


class WriterRankSink(NullSink):
    """Every rank reports through this; only the writer rank passes anything on.

    Each `on_step` does one small all-reduce of (loss, images/s, stop): the recorded
    loss is the mean over ranks, images/s the sum over ranks, and the stop decision
    is shared, so a cancel seen by the writer (or a signal seen by any rank) stops
    every rank at the same step. All ranks must call on_step then should_stop once
    per step, which loop.train_one_epoch does.
    """

    def __init__(self, inner: TrainingSink, env: DistEnv) -> None:
        self.inner, self.env = inner, env
        self._stop = False

    def on_start(self, **kwargs: Any) -> None:
        if self.env.is_writer:
            self.inner.on_start(**kwargs)

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        if not self.env.enabled:  # one process: nothing to share
            self.inner.on_step(step, epoch, loss, lr, images_per_s, world_size=1, **extra)
            self._stop = self.inner.should_stop()
            return
        # The stop bit is read before this step is passed on (it rides in the same all-reduce), so a
        # sink that stops after counting steps stops one step later than with one process.
        local_stop = 1.0 if self.inner.should_stop() else 0.0
        totals = all_reduce_sum(torch.tensor([loss, images_per_s, local_stop], dtype=torch.float64))
        self._stop = bool(totals[2] > 0)
        if self.env.is_writer:
            self.inner.on_step(step, epoch, float(totals[0]) / self.env.world_size, lr, float(totals[1]),
                               **{"world_size": self.env.world_size, **extra})

    def should_stop(self) -> bool:
        """The stop agreed at the last step; with one process the inner sink's, asked now (the validation pass
        asks between steps: a cancel need not wait for it to end)."""
        return self._stop or (not self.env.enabled and self.inner.should_stop())

    def on_epoch(self, epoch: int, metrics: EpochMetrics) -> None:
        if self.env.is_writer:
            self.inner.on_epoch(epoch, metrics)

    def flush(self) -> None:
        if self.env.is_writer:
            self.inner.flush()

    def on_checkpoint(self, path: Any, **kwargs: Any) -> None:
        if self.env.is_writer:
            self.inner.on_checkpoint(path, **kwargs)

    def on_skipped_files(self, count: int, examples: tuple[str, ...]) -> None:
        if self.env.is_writer:
            self.inner.on_skipped_files(count, examples)
