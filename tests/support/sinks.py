"""A training sink that keeps everything it is told, for the tests: steps, epochs, checkpoints, the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlguide_core.training.sinks import NullSink


class RecordingSink(NullSink):
    """Keeps everything in lists; can ask to stop after `stop_after` steps."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.steps: list[dict[str, Any]] = []
        self.epochs: list[tuple[int, dict[str, Any]]] = []
        self.checkpoints: list[tuple[Path, dict[str, Any]]] = []
        self.plan: dict[str, Any] = {}
        self.stop_after = stop_after

    def on_start(self, **kwargs: Any) -> None:
        self.plan = kwargs

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra: Any) -> None:
        self.steps.append({"step": step, "epoch": epoch, "loss": loss, "lr": lr, "images_per_s": images_per_s,
                           **extra})

    def on_epoch(self, epoch: int, metrics: dict[str, Any]) -> None:
        self.epochs.append((epoch, metrics))

    def should_stop(self) -> bool:
        return self.stop_after is not None and len(self.steps) >= self.stop_after

    def on_checkpoint(self, path: Path, **kwargs: Any) -> None:
        self.checkpoints.append((path, kwargs))

