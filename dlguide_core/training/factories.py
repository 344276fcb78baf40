"""The pieces a PyTorch training run is built from: device, model, optimiser, scheduler and loaders.

Small factories, so a DDP run swaps only the pieces it needs (`loop.build_run` puts them together):
the device comes from LOCAL_RANK (`distributed.device_for`), the model is wrapped in DDP
(`wrap_model`), and the loaders read a shard of each epoch (`distributed.ShardedEpochSampler`)
instead of the single-process `EpochSampler`.
"""

from __future__ import annotations

import atexit
import functools
import multiprocessing
import multiprocessing.context
import random
import signal
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler

from dlguide_core.data.image_folders import DataBundle
from dlguide_core.gpu_slots import gpu_index
from dlguide_core.training import distributed
from dlguide_core.training.configs import ConfigError, TrainConfig
from dlguide_core.vision import architectures, models


def resolve_device(spec: str = "auto", slot: int = 0) -> torch.device:
    """auto and cuda take the slot's GPU (gpu_slots.gpu_index: cuda:slot mod the GPUs seen); cuda:N is N."""
    if spec == "cpu" or (spec == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("device cuda was asked for, but PyTorch sees no GPU (use --device cpu or auto)")
    count = torch.cuda.device_count()
    if spec in ("auto", "cuda"):
        return torch.device(f"cuda:{gpu_index(slot, count)}")
    index = spec.partition(":")[2]
    if spec.startswith("cuda:") and index.isdigit() and int(index) >= count:
        raise ConfigError(f"device {spec} was asked for, but PyTorch sees {count} GPU(s)")
    return torch.device(spec)


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def create_model(arch: str, weights: str, num_classes: int) -> tuple[nn.Module, dict[str, Any]]:
    """(model on the CPU, its arch_kwargs) for `weights` = imagenet (the architecture's), none or a checkpoint
    path."""
    spec = architectures.architecture(arch)
    if weights == architectures.UNTRAINED:
        kwargs: dict[str, Any] = {**spec.untrained_kwargs, "num_classes": num_classes}
        return spec.build(**kwargs), kwargs
    if weights == architectures.IMAGENET:
        if problem := spec.imagenet_problem():
            raise ConfigError(problem)
        weights = spec.source(architectures.IMAGENET)
    loaded = models.load_model(weights, device="cpu")
    if loaded.arch != arch:
        raise ConfigError(f"{weights} holds a {loaded.arch} model, not {arch}")
    spec.replace_head(loaded.model, num_classes)  # fine-tuning: the head sized for this dataset
    return loaded.model, {**loaded.arch_kwargs, "num_classes": num_classes}


def wrap_model(model: nn.Module, env: distributed.DistEnv, device: torch.device, cfg: TrainConfig) -> nn.Module:
    """DDP (with SyncBatchNorm if asked) when several processes train; identity on a single device."""
    return distributed.wrap_ddp(model, device, cfg.sync_batchnorm) if env.enabled else model


def create_optimizer(cfg: TrainConfig, model: nn.Module, world_size: int = 1) -> torch.optim.Optimizer:
    lr = distributed.scaled_lr(cfg.lr, world_size, cfg.scale_lr)  # the lr as set unless scale_lr
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def create_scheduler(cfg: TrainConfig, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.StepLR(optimizer, step_size=cfg.lr_step_size, gamma=cfg.lr_gamma)


class EpochSampler(Sampler[int]):
    """A shuffle that is a pure function of (seed, epoch), so a resumed epoch skips exactly
    the batches already trained on instead of starting the epoch over."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed, self.epoch, self.skip = size, seed, 0, 0

    def set_position(self, epoch: int, skip_samples: int) -> None:
        self.epoch, self.skip = epoch, skip_samples

    def __iter__(self) -> Any:
        return iter(distributed.epoch_permutation(self.size, self.seed, self.epoch)[self.skip:])

    def __len__(self) -> int:
        return self.size - self.skip


def ignore_stop_signals(_worker_id: int) -> None:
    """A DataLoader worker's `worker_init_fn`: TERM and INT are the main process's to decide on.

    A scheduler's stop (Slurm's scancel, preemption, a time limit) sends TERM to every process of the job. torch's
    worker handler re-raises a TERM that does not come from its parent, so the worker died and the main process
    failed with "DataLoader worker (pid N) is killed by signal: Terminated" before its checkpointed stop. Ignored
    here, the workers keep serving batches until the main process stops; they exit when it goes (torch's
    watchdog checks the parent). Forked with both blocked (_StopsBlockedFork), a worker holds a TERM that came
    before this point; ignoring it drops it (POSIX discards a pending signal set to SIG_IGN), then they unblock."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


class _StopsBlockedFork(multiprocessing.context.ForkProcess):
    """A loader worker forked with TERM and INT blocked until its worker_init_fn. A stop that lands while workers
    start (the val loader's at an epoch's end) otherwise killed one (seen under Slurm: a torchrun agent's killpg
    and Slurm's TERM reach every process): the rank failed without its checkpoint. The parent's mask is restored
    at once; a TERM it got meanwhile is handled then."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            return multiprocessing.context.ForkProcess._Popen(process_obj)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class _StopsBlockedForkContext(multiprocessing.context.ForkContext):
    Process = _StopsBlockedFork


def _worker_context() -> dict[str, Any]:
    """Where loader workers are forked (the default start method, "fork" on Linux up to Python 3.13): the context
    that blocks stops until they ignore them; elsewhere the default one."""
    default = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
    return {"multiprocessing_context": _StopsBlockedForkContext()} if default == "fork" else {}


def worker_options(workers: int) -> dict[str, Any]:
    """DataLoader arguments for `workers` processes: persistent, and leaving stops to the main process."""
    if workers <= 0:
        return {"num_workers": 0}
    _end_workers_at_exit()
    return {"num_workers": workers, "persistent_workers": True,  # workers survive epochs: no re-fork per epoch
            "worker_init_fn": ignore_stop_signals, **_worker_context()}


@functools.cache
def _end_workers_at_exit() -> None:
    """Workers that ignore TERM would hang multiprocessing's own exit handler (terminate, then join without a
    timeout) when a loader is still alive at exit: end them first (atexit runs the last registered first)."""
    atexit.register(_kill_daemon_children)


def _kill_daemon_children() -> None:
    import multiprocessing

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # torch's SIGCHLD check would report these ends as failures
    for child in multiprocessing.active_children():
        if child.daemon:
            child.kill()


def create_loaders(bundle: DataBundle, cfg: TrainConfig, device: torch.device,
                   env: distributed.DistEnv | None = None) -> tuple[DataLoader, DataLoader]:
    """Under DDP each rank reads its shard of every epoch and of the val set (batch_size is per device)."""
    env = env or distributed.DistEnv()
    sampler = (distributed.ShardedEpochSampler(bundle.train, env.world_size, env.rank, cfg.seed) if env.enabled
               else EpochSampler(len(bundle.train), cfg.seed))
    val_sampler = distributed.ShardSampler(len(bundle.val), env.world_size, env.rank) if env.enabled else None
    common = {"pin_memory": device.type == "cuda", **worker_options(cfg.workers)}
    train = DataLoader(bundle.train, batch_size=cfg.batch_size, sampler=sampler, **common)
    val = DataLoader(bundle.val, batch_size=cfg.batch_size, shuffle=False, sampler=val_sampler, **common)
    return train, val
