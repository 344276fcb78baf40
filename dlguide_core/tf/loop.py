"""The Keras training loop of the TensorFlow recipes, and their checkpoints.

A Keras callback turns every batch into `sink.on_step` and asks `sink.should_stop()`; a cancel sets
`model.stop_training`, so Keras stops after the current batch, and the run is saved. Checkpoints are
Keras `.keras` files under the job folder, committed by a small JSON record written last (see save_state).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dlguide_core.errors import DlguideError
from dlguide_core.training.configs import RunContext, RunResult
from dlguide_core.training.sinks import EpochMetrics, TrainingSink

STATE_FILE = "checkpoint.json"  # the commit record of the latest .keras checkpoint


@dataclass
class TfRun:
    """One TensorFlow run; `step` is global and continues across resumes, `batch` counts
    the batches of `epoch` already trained on, so a resume skips exactly those."""

    cfg: Any
    recipe: str
    model: Any
    epoch_data: Callable[[int, int], dict[str, Any]]  # (epoch, skip batches) -> model.fit kwargs
    val_data: dict[str, Any]  # model.evaluate kwargs
    steps_per_epoch: int
    class_names: tuple[str, ...]
    job_dir: Path
    step: int = 0
    epoch: int = 0
    batch: int = 0
    stopped: bool = False
    extra_state: dict[str, Any] = field(default_factory=dict)

    @property
    def total_steps(self) -> int:
        steps = self.cfg.epochs * self.steps_per_epoch
        return min(steps, self.cfg.max_steps) if self.cfg.max_steps else steps

    @property
    def out_of_steps(self) -> bool:
        return bool(self.cfg.max_steps) and self.step >= self.cfg.max_steps


def make_sink_callback(run: TfRun, sink: TrainingSink) -> Any:
    """A Keras callback that streams every batch into `sink` and stops when it asks to."""
    import keras

    class SinkCallback(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.started = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            logs = logs or {}
            run.step, run.batch = run.step + 1, run.batch + 1
            rate = run.cfg.batch_size / max(time.perf_counter() - self.started, 1e-9)
            lr = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
            # Keras reports the running mean of the epoch so far, for loss and accuracy alike.
            sink.on_step(run.step, run.epoch, float(logs.get("loss", math.nan)), lr, rate,
                         accuracy=float(logs.get("accuracy", math.nan)))
            if sink.should_stop():
                run.stopped = True
            if run.stopped or run.out_of_steps:
                self.model.stop_training = True  # Keras ends fit() after this batch

    return SinkCallback()


def train_one_epoch(run: TfRun, sink: TrainingSink) -> dict[str, float]:
    """The rest of `run.epoch` (from `run.batch`) through model.fit; returns Keras' epoch logs."""
    if run.batch >= run.steps_per_epoch:
        return {}
    history = run.model.fit(**run.epoch_data(run.epoch, run.batch), epochs=run.epoch + 1, initial_epoch=run.epoch,
                            callbacks=[make_sink_callback(run, sink)], verbose=0)
    return {name: float(values[-1]) for name, values in history.history.items() if values}


def evaluate(run: TfRun) -> EpochMetrics:
    result = run.model.evaluate(**run.val_data, return_dict=True, verbose=0)
    return {"val_loss": float(result["loss"]), "top1": 100.0 * float(result["accuracy"])}


def fit(run: TfRun, sink: TrainingSink) -> RunResult:
    """Train until the last epoch, `max_steps` or a stop request, saving after every epoch."""
    import keras

    sink.on_start(total_steps=run.total_steps, epochs=run.cfg.epochs, class_names=run.class_names,
                  start_step=run.step, start_epoch=run.epoch)
    path = None
    while run.epoch < run.cfg.epochs and not run.out_of_steps:
        train = train_one_epoch(run, sink)
        if run.stopped:
            return RunResult("stopped", run.step, run.epoch, save_state(run, sink))
        metrics: EpochMetrics = {
            "train_loss": train.get("loss", math.nan), "train_accuracy": 100.0 * train.get("accuracy", math.nan),
            **evaluate(run), "lr": float(keras.ops.convert_to_numpy(run.model.optimizer.learning_rate))}
        sink.on_epoch(run.epoch, metrics)
        if run.batch >= run.steps_per_epoch:
            run.epoch, run.batch = run.epoch + 1, 0
        path = save_state(run, sink)
    return RunResult("completed", run.step, run.epoch, path)


def write_json(path: Path, data: Any) -> None:
    """`data` as JSON at `path`, atomically (the checkpoint record, the vocabulary, evaluation.json)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # atomic: a reader sees the old record or the new one


def save_state(run: TfRun, sink: TrainingSink) -> Path:
    """A new `ckpt-<step>.keras` (weights + optimiser), then the JSON record naming it.

    The record is written last and atomically, so a crash mid-save leaves the previous
    checkpoint in force; older .keras files are removed only after the record moved on."""
    path = run.job_dir / f"ckpt-{run.step:08d}.keras"
    tmp = run.job_dir / f"tmp-{run.step:08d}.keras"  # Keras insists on the .keras suffix
    run.job_dir.mkdir(parents=True, exist_ok=True)
    sink.flush()  # the store must hold every step the checkpoint covers before the record moves on
    run.model.save(tmp)
    os.replace(tmp, path)
    write_json(run.job_dir / STATE_FILE, {
        "checkpoint": path.name, "recipe": run.recipe, "config": asdict(run.cfg), "step": run.step,
        "epoch": run.epoch, "batch": run.batch, "class_names": list(run.class_names), **run.extra_state})
    for old in run.job_dir.glob("ckpt-*.keras"):
        if old != path:
            old.unlink(missing_ok=True)
    sink.on_checkpoint(path, step=run.step, epoch=run.epoch)
    return path


def read_state(job_dir: Path) -> dict[str, Any] | None:
    record = job_dir / STATE_FILE
    if not record.is_file():
        return None
    return json.loads(record.read_text())


def resuming(ctx: RunContext) -> bool:
    """Whether this run continues an earlier attempt of its job."""
    # The job folder is the job's own, so a committed record there is this job's earlier attempt.
    # (The job runner sets ctx.resume from the PyTorch checkpoint file, which these recipes never write.)
    return ctx.resume or (ctx.job_dir / STATE_FILE).is_file()


def restore_state(run: TfRun) -> None:
    """Model weights, optimiser state and position from the last committed checkpoint."""
    import keras

    state = read_state(run.job_dir)
    if state is None:
        return  # nothing saved yet (cancelled before the first batch): start over
    if state.get("recipe") != run.recipe:
        raise DlguideError(f"{run.job_dir} holds a {state.get('recipe')} checkpoint, not {run.recipe}")
    run.model = keras.models.load_model(run.job_dir / state["checkpoint"])
    run.step, run.epoch, run.batch = int(state["step"]), int(state["epoch"]), int(state["batch"])
