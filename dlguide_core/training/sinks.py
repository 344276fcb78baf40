"""How a training loop reports progress, without knowing who listens.

Like minGPT's `on_batch_end` callbacks: the loop (PyTorch or TensorFlow) calls a
sink; the job process passes one that streams into the job store, the foreground
CLI adds one that prints, tests pass one that records. Every method is cheap and
never raises into the loop.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Protocol, TextIO, TypedDict

# Optional per-step metrics a loop may pass to `on_step` in `**extra`, as listeners keep them:
# (column, key in extra, scale). TensorFlow jobs pass Keras' running training accuracy of the epoch
# so far as a fraction; it is kept in percent, like top1/top5 everywhere else (store, TensorBoard).
STEP_EXTRAS = (("accuracy", "accuracy", 100.0),)


class EpochMetrics(TypedDict, total=False):
    """What a loop reports at an epoch's end (`on_epoch`), end to end: the sinks pass it on, the store keeps the
    first four in its `epochs` columns (jobs.metric_tables.EPOCH_METRICS) and the rest as JSON, and reads it back
    as an `EpochRow`. Losses in nats, accuracies in percent; None where a recipe does not measure one."""

    train_loss: float | None
    val_loss: float | None
    top1: float | None
    top5: float | None  # not measured by the TensorFlow recipes
    lr: float
    train_accuracy: float  # TensorFlow recipes: Keras' training accuracy of the epoch
    per_class: dict[str, float]  # class name -> top-1 at this epoch (PyTorch recipes)


class TrainingSink(Protocol):
    """The framework-neutral reporting interface every recipe's loop talks to."""

    def on_start(self, *, total_steps: int | None, epochs: int, class_names: tuple[str, ...] = (),
                 start_step: int | None = None, start_epoch: int | None = None) -> None:
        """The plan, once per run (after a resume too): lets the UI show progress and an ETA.

        Every loop passes `start_step`/`start_epoch`: where this run begins, 0 for a new run, the
        restored checkpoint's position after a resume. Metrics a listener holds past that point
        belong to steps the run is about to redo (the checkpoint file, not any record of it, is the
        truth). None (a loop that does not say) means: keep everything."""

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        """After each optimiser step; `step` is the global step (1-based, continues across resumes)."""

    def on_epoch(self, epoch: int, metrics: EpochMetrics) -> None:
        """After each epoch's validation; metrics hold train_loss, val_loss, top1, top5 (+ anything else)."""

    def should_stop(self) -> bool:
        """Polled once per step: True means checkpoint now and return (cancel or shutdown)."""
        return False

    def flush(self) -> None:
        """Before a checkpoint is written: every step reported so far must be durable on return.

        A resume continues from the checkpoint's step, so a step the checkpoint already covers
        but the store never received would be a permanent gap in the curve."""

    def on_checkpoint(self, path: Path, *, step: int | None = None, epoch: int | None = None) -> None:
        """After a checkpoint is safely on disk; `epoch` is the number of completed epochs."""

    def on_skipped_files(self, count: int, examples: tuple[str, ...]) -> None:
        """Once per run, when the dataset left unreadable files out: how many, and up to 5 of them."""


class NullSink:
    """Listens to nothing; the base for partial sinks."""

    def on_start(self, *, total_steps: int | None, epochs: int, class_names: tuple[str, ...] = (),
                 start_step: int | None = None, start_epoch: int | None = None) -> None:
        pass

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        pass

    def on_epoch(self, epoch: int, metrics: EpochMetrics) -> None:
        pass

    def should_stop(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def on_checkpoint(self, path: Path, *, step: int | None = None, epoch: int | None = None) -> None:
        pass

    def on_skipped_files(self, count: int, examples: tuple[str, ...]) -> None:
        pass


class TeeSink(NullSink):
    """Forwards to several sinks; stops when any of them asks to."""

    def __init__(self, *sinks: TrainingSink) -> None:
        self.sinks = sinks

    def on_start(self, **kwargs: Any) -> None:
        for sink in self.sinks:
            sink.on_start(**kwargs)

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        for sink in self.sinks:
            sink.on_step(step, epoch, loss, lr, images_per_s, **extra)

    def on_epoch(self, epoch: int, metrics: EpochMetrics) -> None:
        for sink in self.sinks:
            sink.on_epoch(epoch, metrics)

    def should_stop(self) -> bool:
        return any(sink.should_stop() for sink in self.sinks)

    def flush(self) -> None:
        for sink in self.sinks:
            sink.flush()

    def on_checkpoint(self, path: Path, **kwargs: Any) -> None:
        for sink in self.sinks:
            sink.on_checkpoint(path, **kwargs)

    def on_skipped_files(self, count: int, examples: tuple[str, ...]) -> None:
        for sink in self.sinks:
            sink.on_skipped_files(count, examples)


class ConsoleSink(NullSink):
    """Prints progress for the foreground CLI: a line every `every` steps and per epoch."""

    def __init__(self, every: int = 10, stream: TextIO | None = None) -> None:
        self.every = every
        self.stream = stream or sys.stderr
        self.total: int | None = None

    def on_start(self, *, total_steps: int | None, epochs: int, class_names: tuple[str, ...] = (),
                 start_step: int | None = None, start_epoch: int | None = None) -> None:
        self.total = total_steps
        print(f"training {epochs} epoch(s), {total_steps or '?'} steps, {len(class_names)} classes",
              file=self.stream, flush=True)

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        if step % self.every == 0 or step == 1 or step == self.total:
            of = f"/{self.total}" if self.total else ""
            print(f"epoch {epoch + 1} step {step}{of}  loss {loss:.4f}  lr {lr:.3g}  {images_per_s:.1f} img/s",
                  file=self.stream, flush=True)

    def on_epoch(self, epoch: int, metrics: EpochMetrics) -> None:
        shown = "  ".join(f"{k} {v:.4f}" for k, v in metrics.items() if isinstance(v, float))
        print(f"epoch {epoch + 1} done  {shown}", file=self.stream, flush=True)

    def on_checkpoint(self, path: Path, **kwargs: Any) -> None:
        print(f"checkpoint {path} (step {kwargs.get('step')})", file=self.stream, flush=True)

    def on_skipped_files(self, count: int, examples: tuple[str, ...]) -> None:
        print(f"skipped {count} unreadable file(s): " + "; ".join(examples), file=self.stream, flush=True)
