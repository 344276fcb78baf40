"""The PyTorch training loop of the recipes that train a registered architecture (vision/architectures.py).

UI-agnostic: progress goes to a TrainingSink (see sinks.py), checkpoints go through
checkpoints.save_checkpoint. `build_run` puts a run together from the small factories of
`factories` (device, model, optimiser, loaders), which a DDP run swaps piece by piece:
it picks the device from LOCAL_RANK, wraps the model in DDP and gives each rank its shard.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from dlguide_core.data.image_folders import DataBundle, load_data
from dlguide_core.errors import DlguideError
from dlguide_core.training import distributed
from dlguide_core.training.configs import RunContext, RunResult, TrainConfig
from dlguide_core.training.factories import (
    create_loaders,
    create_model,
    create_optimizer,
    create_scheduler,
    device_name,
    resolve_device,
    seed_everything,
    wrap_model,
)
from dlguide_core.training.sinks import EpochMetrics, TrainingSink
from dlguide_core.vision.checkpoints import load_checkpoint, save_checkpoint


class TrainingFailed(DlguideError):
    """Training cannot go on (diverged, impossible settings)."""


# ------------------------------------------------------------------ the loop


@dataclass
class TrainingRun:
    """Everything one run mutates; `step` is global and continues across resumes."""

    cfg: TrainConfig
    recipe: str
    arch: str
    arch_kwargs: dict[str, Any]
    bundle: DataBundle
    device: torch.device
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    criterion: nn.Module
    train_loader: DataLoader
    val_loader: DataLoader
    job_id: str = ""
    step: int = 0
    epoch: int = 0  # the epoch in progress (0-based); == cfg.epochs when finished
    batch: int = 0  # batches of `epoch` already trained on
    loss_sum: float = 0.0  # this epoch's train loss so far (survives a resume mid-epoch)
    loss_count: int = 0
    last_checkpoint: float = field(default_factory=time.monotonic)
    dist: distributed.DistEnv = field(default_factory=distributed.DistEnv)  # one process unless torchrun

    @property
    def memory_format(self) -> torch.memory_format:
        return torch.channels_last if self.cfg.channels_last else torch.contiguous_format

    @property
    def amp_dtype(self) -> torch.dtype | None:
        """Autocast only on GPUs (CPU autocast is slower than fp32 for these convnets)."""
        if not self.cfg.amp or self.device.type != "cuda":
            return None
        return torch.float16 if self.cfg.amp_dtype == "float16" else torch.bfloat16

    @property
    def total_steps(self) -> int:
        steps = self.cfg.epochs * distributed.steps_per_epoch(len(self.bundle.train), self.cfg.batch_size,
                                                              self.dist.world_size)
        return min(steps, self.cfg.max_steps) if self.cfg.max_steps else steps


def build_run(cfg: TrainConfig, recipe: str, job_id: str = "", slot: int = 0,
              env: distributed.DistEnv | None = None) -> TrainingRun:
    arch = getattr(cfg, "ARCH", recipe)  # the configs name the architecture they train
    env = env or distributed.DistEnv()
    seed_everything(cfg.seed)
    device = distributed.device_for(cfg.device, env, slot) if env.enabled else resolve_device(cfg.device, slot)
    # Every batch has the same shape: let cuDNN/MIOpen time the convolution algorithms once and keep
    # the fastest, as the guide's (torchvision reference) script does.
    torch.backends.cudnn.benchmark = device.type == "cuda"
    bundle = load_data(arch, cfg.data, cfg.image_size)
    model, arch_kwargs = create_model(arch, cfg.weights, len(bundle.class_names))
    model = model.to(device, memory_format=torch.channels_last) if cfg.channels_last else model.to(device)
    model = wrap_model(model, env, device, cfg)
    optimizer = create_optimizer(cfg, model, env.world_size)
    train_loader, val_loader = create_loaders(bundle, cfg, device, env)
    fp16 = cfg.amp and cfg.amp_dtype == "float16" and device.type == "cuda"
    return TrainingRun(cfg, recipe, arch, arch_kwargs, bundle, device, model, optimizer,
                       create_scheduler(cfg, optimizer), torch.amp.GradScaler(device.type, enabled=fp16),
                       nn.CrossEntropyLoss(label_smoothing=cfg.label_smoothing), train_loader, val_loader,
                       job_id=job_id, dist=env)


def _forward_loss(run: TrainingRun, images: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = run.amp_dtype
    with torch.autocast(run.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        output = run.model(images)  # (B, classes)
        return output, run.criterion(output, targets)


def _to_device(run: TrainingRun, images: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    images = images.to(run.device, non_blocking=True, memory_format=run.memory_format)  # (B, 3, S, S)
    return images, targets.to(run.device, non_blocking=True)


def train_step(run: TrainingRun, images: torch.Tensor, targets: torch.Tensor) -> float:
    images, targets = _to_device(run, images, targets)
    _, loss = _forward_loss(run, images, targets)
    run.optimizer.zero_grad(set_to_none=True)
    run.scaler.scale(loss).backward()
    run.scaler.step(run.optimizer)
    run.scaler.update()
    value = loss.item()  # one sync per step: the curve needs it anyway
    if not math.isfinite(value):
        raise TrainingFailed(f"loss became {value} at step {run.step + 1}; lower the learning rate "
                             f"(now {run.cfg.lr}) or turn off --amp")
    return value


def train_one_epoch(run: TrainingRun, sink: TrainingSink, checkpoint: Path | None) -> str:
    """Train from `run.batch` to the end of `run.epoch`; returns why it ended."""
    run.model.train()
    run.train_loader.sampler.set_position(run.epoch, run.batch * run.cfg.batch_size)
    last = time.perf_counter()
    for images, targets in run.train_loader:
        loss = train_step(run, images, targets)
        run.step, run.batch = run.step + 1, run.batch + 1
        run.loss_sum, run.loss_count = run.loss_sum + loss, run.loss_count + 1
        now = time.perf_counter()
        sink.on_step(run.step, run.epoch, loss, run.optimizer.param_groups[0]["lr"], len(images) / (now - last))
        last = now
        if sink.should_stop():
            return "stopped"
        if run.cfg.max_steps and run.step >= run.cfg.max_steps:
            return "max_steps"
        if checkpoint and time.monotonic() - run.last_checkpoint > run.cfg.checkpoint_minutes * 60:
            save_run(run, checkpoint, sink)
            last = time.perf_counter()  # the save is not training time
    return "epoch_end"


class ValidationStopped(Exception):
    """A stop (a cancel) asked for during the validation pass: its partial scores are not an epoch's."""


@torch.inference_mode()
def evaluate(run: TrainingRun, should_stop: Callable[[], bool] | None = None) -> EpochMetrics:
    """Val loss, top-1 and top-5 (percent) and per-class top-1 over the whole val split.

    `should_stop` is asked after each batch: a cancel need not wait for the whole pass (30-45 s on the tiny
    ImageNet val split on CPU); it raises ValidationStopped. Under DDP the wrapper's answer is the one every rank
    agreed on at the last step, so all ranks run the same batches and meet in the all-reduce below."""
    run.model.eval()
    classes = len(run.bundle.class_names)
    loss_sum, top1, top5, seen = 0.0, 0, 0, 0
    correct, per_class = torch.zeros(classes), torch.zeros(classes)
    for images, targets in run.val_loader:
        if should_stop is not None and should_stop():
            raise ValidationStopped
        images, targets = _to_device(run, images, targets)
        output, loss = _forward_loss(run, images, targets)
        ranked = output.float().topk(min(5, classes), dim=1).indices  # (B, k)
        hit1 = (ranked[:, 0] == targets).cpu()
        loss_sum += loss.item() * len(targets)
        top1 += int(hit1.sum())
        top5 += int((ranked == targets[:, None]).any(dim=1).sum())
        seen += len(targets)
        correct.index_add_(0, targets.cpu(), hit1.float())
        per_class.index_add_(0, targets.cpu(), torch.ones(len(targets)))
    # Under DDP each rank saw one shard of the val set: add the shards up (identity with one process).
    totals = distributed.all_reduce_sum(torch.cat([torch.tensor([loss_sum, top1, top5, seen], dtype=torch.float64),
                                                   correct.double(), per_class.double()]))
    loss_sum, (top1, top5, seen) = float(totals[0]), (int(v) for v in totals[1:4])
    correct, per_class = totals[4:4 + classes], totals[4 + classes:]
    names = run.bundle.class_names
    return {"val_loss": loss_sum / max(seen, 1), "top1": 100.0 * top1 / max(seen, 1),
            "top5": 100.0 * top5 / max(seen, 1),
            "per_class": {names[i]: round(100.0 * float(correct[i] / per_class[i]), 2)
                          for i in range(classes) if per_class[i] > 0}}


# ------------------------------------------------------------------ checkpoints and the recipe entry


def save_run(run: TrainingRun, path: Path, sink: TrainingSink) -> Path:
    """Atomic checkpoint of the whole run state (loads with weights_only=True); under DDP the writer rank's."""
    if not run.dist.is_writer:  # every rank holds the same weights: one file, one writer
        run.last_checkpoint = time.monotonic()
        return path
    model = getattr(run.model, "module", run.model)  # unwrap DDP
    sink.flush()  # the store must hold every step the checkpoint covers before the file exists
    save_checkpoint(path, {
        "arch": run.arch, "arch_kwargs": run.arch_kwargs, "class_names": list(run.bundle.class_names),
        "display_names": list(run.bundle.display_names or run.bundle.class_names),
        "preset": run.bundle.eval_preset.to_dict(), "train_preset": run.bundle.train_preset.to_dict(),
        "model": model.state_dict(), "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(), "scaler": run.scaler.state_dict(),
        "epoch": run.epoch, "batch": run.batch, "step": run.step, "loss_sum": run.loss_sum,
        "loss_count": run.loss_count, "config": asdict(run.cfg),
        "job_id": run.job_id, "recipe": run.recipe,
    })
    run.last_checkpoint = time.monotonic()
    sink.on_checkpoint(path, step=run.step, epoch=run.epoch)
    return path


def restore_run(run: TrainingRun, path: Path) -> None:
    data = load_checkpoint(path, map_location="cpu")
    if data.get("recipe") not in (None, run.recipe) or list(data["class_names"]) != list(run.bundle.class_names):
        raise TrainingFailed(f"{path} was written for other data or another recipe; cannot resume from it")
    getattr(run.model, "module", run.model).load_state_dict(data["model"])
    run.optimizer.load_state_dict(data["optimizer"])
    run.scheduler.load_state_dict(data["scheduler"])
    run.scaler.load_state_dict(data["scaler"])
    run.step, run.epoch, run.batch = int(data["step"]), int(data["epoch"]), int(data["batch"])
    run.loss_sum, run.loss_count = float(data.get("loss_sum", 0.0)), int(data.get("loss_count", 0))


def _finish_epoch(run: TrainingRun, sink: TrainingSink, stoppable: bool) -> bool:
    """Validate and record the epoch; False when a stop came during the validation pass (`stoppable`: only at an
    epoch's end, where a resume trains no step and validates again; a run's last pass at max steps completes)."""
    loss_sum, loss_count = distributed.all_reduce_sum(torch.tensor([run.loss_sum, run.loss_count],
                                                                   dtype=torch.float64)).tolist()
    train_loss = loss_sum / loss_count if loss_count else float("nan")  # mean over every rank's steps
    try:
        scores = evaluate(run, sink.should_stop if stoppable else None)
    except ValidationStopped:
        return False
    sink.on_epoch(run.epoch, {"train_loss": train_loss, **scores, "lr": run.optimizer.param_groups[0]["lr"]})
    return True


def fit(run: TrainingRun, sink: TrainingSink, checkpoint: Path | None) -> RunResult:
    """Train until the last epoch, `max_steps`, or the sink asks to stop (checkpointing each time)."""
    sink.on_start(total_steps=run.total_steps, epochs=run.cfg.epochs, class_names=run.bundle.class_names,
                  start_step=run.step, start_epoch=run.epoch)
    if run.bundle.skipped.count:  # unreadable files the dataset left out (data.safe_folders)
        sink.on_skipped_files(run.bundle.skipped.count, run.bundle.skipped.examples)
    while run.epoch < run.cfg.epochs and not (run.cfg.max_steps and run.step >= run.cfg.max_steps):
        why = train_one_epoch(run, sink, checkpoint)
        if why == "stopped" or not _finish_epoch(run, sink, stoppable=why == "epoch_end"):
            path = save_run(run, checkpoint, sink) if checkpoint else None
            return RunResult("stopped", run.step, run.epoch, path)
        if why == "epoch_end":
            run.scheduler.step()  # StepLR counts epochs
            run.epoch, run.batch, run.loss_sum, run.loss_count = run.epoch + 1, 0, 0.0, 0
        if checkpoint:
            save_run(run, checkpoint, sink)
    return RunResult("completed", run.step, run.epoch, checkpoint if checkpoint and checkpoint.exists() else None)


def run_recipe(cfg: TrainConfig, ctx: RunContext) -> RunResult:
    """The registry entry point of the PyTorch recipes."""
    run = build_run(cfg, ctx.recipe, ctx.job_id, ctx.slot, ctx.dist)
    # The job log (stdout and stderr) says where it ran; stderr keeps `train --json` output pure JSON.
    print(f"training on {run.device} ({device_name(run.device)})", file=sys.stderr, flush=True)
    if ctx.resume and ctx.checkpoint_path.is_file():
        restore_run(run, ctx.checkpoint_path)
    return fit(run, ctx.sink, ctx.checkpoint_path)
