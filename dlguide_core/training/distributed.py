"""Data-parallel training across devices and machines through torchrun + DistributedDataParallel.

torchrun starts one process per device and tells each its place through the
environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
TORCHELASTIC_RESTART_COUNT...). This module turns that into a process group
(NCCL on GPUs, which on ROCm builds is RCCL; Gloo on the CPU), a device per local
rank, a DDP-wrapped model, a shard of every epoch per rank, and the collectives
the ranks share numbers with. The building blocks only: the sink through which only the writer
rank reports is in distributed_sinks; the torchrun worker that runs a job with them is
jobs.worker, and its command lines (for this machine and the others of a multi-node run) are
built by jobs.launch, which needs no torch.

Meaning of the numbers: `batch_size` is per device, so the global batch is
batch_size x world_size; the learning rate stays as set unless the linear scaling
rule is asked for (lr x world_size, Goyal et al. 2017).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import Dataset, DistributedSampler, Sampler

from dlguide_core.errors import DistributedError
from dlguide_core.gpu_slots import gpu_index

TIMEOUT_S = 600  # a collective that waits longer than this fails instead of hanging forever


# ------------------------------------------------------------------ where this process stands


@dataclass(frozen=True)
class DistEnv:
    """This process's place in the run, read from the variables torchrun sets."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    restart_count: int = 0
    max_restarts: int = 0
    under_torchrun: bool = False
    writer_rank: int = 0  # the rank that owns the job record (see find_writer)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DistEnv:
        env = os.environ if environ is None else environ
        world = int(env.get("WORLD_SIZE", "1"))
        return cls(rank=int(env.get("RANK", "0")), local_rank=int(env.get("LOCAL_RANK", "0")), world_size=world,
                   local_world_size=int(env.get("LOCAL_WORLD_SIZE", str(world))),
                   restart_count=int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
                   max_restarts=int(env.get("TORCHELASTIC_MAX_RESTARTS", "0")),
                   under_torchrun="TORCHELASTIC_RUN_ID" in env)

    @property
    def enabled(self) -> bool:
        """More than one process: gradients, metrics and stop decisions must be shared."""
        return self.world_size > 1

    @property
    def is_writer(self) -> bool:
        return self.rank == self.writer_rank

    @property
    def restarts_left(self) -> int:
        return max(self.max_restarts - self.restart_count, 0)


def device_for(spec: str, env: DistEnv, slot: int = 0) -> torch.device:
    """One device per local rank: cuda:(slot + LOCAL_RANK) when GPUs are used (gpu_slots.gpu_index), else the CPU."""
    if spec == "cpu" or (spec == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise DistributedError("device cuda was asked for, but PyTorch sees no GPU (use --device cpu or auto)")
    count = torch.cuda.device_count()
    if env.local_rank >= count:
        raise DistributedError(f"{env.local_world_size} processes on this machine but PyTorch sees {count} GPU(s); "
                               f"use --nproc-per-node {count} or fewer")
    return torch.device(f"cuda:{gpu_index(slot + env.local_rank, count)}")


def destroy_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Linux: get `sig` when torchrun's agent dies, so a killed launcher leaves no orphan workers."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(sig), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except OSError:
        pass  # not glibc: the agent's own SIGTERM forwarding still stops workers


def is_peer_failure(exc: BaseException) -> bool:
    """True for the errors a collective raises when another rank died or the network broke."""
    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(
        key in text for key in ("connection closed", "connection reset", "broken pipe", "gloo", "nccl", "timed out"))


# ------------------------------------------------------------------ model and data


def wrap_ddp(model: nn.Module, device: torch.device, sync_batchnorm: bool = False) -> nn.Module:
    """DDP over a model already on `device`; SyncBatchNorm shares BN statistics across ranks (GPUs only)."""
    if sync_batchnorm:
        if device.type != "cuda":
            raise DistributedError("sync batchnorm needs GPUs (NCCL/RCCL); turn it off for CPU runs")
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids)


def epoch_permutation(size: int, seed: int, epoch: int) -> list[int]:
    """The shuffle of one epoch, a pure function of (seed, epoch): a resumed epoch, any rank and
    any world size agree on it, so a resume skips exactly the samples already trained on."""
    generator = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return torch.randperm(size, generator=generator).tolist()


class ShardedEpochSampler(DistributedSampler):
    """This rank's shard of an epoch whose shuffle is a pure function of (seed, epoch).

    The permutation is `epoch_permutation`, as factories.EpochSampler's, so one process sees the
    same order as before; rank r takes every world_size-th index (padded to equal
    shards, as DistributedSampler does). `set_position` skips the batches already
    trained on when a run resumes mid-epoch.
    """

    def __init__(self, dataset: Dataset, num_replicas: int, rank: int, seed: int) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed)
        self.skip = 0

    def set_position(self, epoch: int, skip_samples: int) -> None:
        self.set_epoch(epoch)
        self.skip = skip_samples

    def __iter__(self) -> Iterator[int]:
        size = len(self.dataset)
        order = epoch_permutation(size, self.seed, self.epoch)
        order += order[: self.total_size - size]  # pad so every rank runs the same number of steps
        return iter(order[self.rank: self.total_size: self.num_replicas][self.skip:])

    def __len__(self) -> int:
        return self.num_samples - self.skip


class ShardSampler(Sampler[int]):
    """Every world_size-th index, no shuffle, no padding: shards that add up to the whole val set once."""

    def __init__(self, size: int, num_replicas: int, rank: int) -> None:
        self.indices = list(range(rank, size, num_replicas))

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def steps_per_epoch(dataset_size: int, batch_size: int, world_size: int) -> int:
    """Optimiser steps per epoch when each of `world_size` ranks takes `batch_size` of its shard."""
    return math.ceil(math.ceil(dataset_size / world_size) / batch_size)


def scaled_lr(lr: float, world_size: int, linear_scaling: bool) -> float:
    """The linear scaling rule: k times the global batch, k times the lr. Off by default."""
    return lr * world_size if linear_scaling else lr


def check_devices(device: str, sync_batchnorm: bool) -> None:
    """Refuse up front what would only fail once the job runs: SyncBatchNorm without a GPU."""
    if sync_batchnorm and (device == "cpu" or (device == "auto" and not torch.cuda.is_available())):
        raise DistributedError("sync batchnorm needs GPUs (NCCL/RCCL) and this job would run on the CPU; "
                               "turn it off (--sync-batchnorm) or use a GPU machine")


# ------------------------------------------------------------------ collectives


def _comm_device() -> torch.device:
    # NCCL only moves GPU tensors; Gloo works on CPU tensors.
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_sum(values: torch.Tensor) -> torch.Tensor:
    """Sum `values` over ranks (identity with one process); returns a CPU tensor."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return values
    shared = values.to(_comm_device())
    dist.all_reduce(shared, op=dist.ReduceOp.SUM)
    return shared.cpu()


def find_writer(env: DistEnv, owns_job: bool) -> int:
    """The lowest rank that holds the job record: c10d rendezvous numbers nodes in no fixed
    order, so global rank 0 may sit on a machine without the store."""
    rank = torch.tensor([env.rank if owns_job else env.world_size], dtype=torch.int64)
    if env.enabled:
        shared = rank.to(_comm_device())
        dist.all_reduce(shared, op=dist.ReduceOp.MIN)
        rank = shared.cpu()
    if int(rank) >= env.world_size:
        raise DistributedError("no process of this run holds the job: start the run on the machine with the "
                               "dashboard (node rank 0) too")
    return int(rank)


def broadcast_bytes(data: bytes | None, src: int) -> bytes:
    """Send bytes from rank `src` to all ranks as a uint8 tensor (no pickle on the way in)."""
    device = _comm_device()
    size = torch.tensor([len(data) if data is not None else 0], dtype=torch.int64, device=device)
    dist.broadcast(size, src)
    buffer = torch.empty(int(size), dtype=torch.uint8, device=device)
    if data is not None:
        buffer.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    dist.broadcast(buffer, src)
    return buffer.cpu().numpy().tobytes()


def broadcast_json(obj: Any, src: int) -> Any:
    data = json.dumps(obj).encode() if obj is not None else None
    return json.loads(broadcast_bytes(data, src).decode())


# ------------------------------------------------------------------ the process group


def process_group_backend() -> str:
    """Gloo for CPU tensors (control messages, CPU runs) plus NCCL/RCCL for GPU tensors when GPUs exist,
    so every rank can join before it knows which device the job wants."""
    return "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"


def _attempt_store(env: DistEnv, timeout: timedelta) -> dist.Store:
    """torchrun's store, under a prefix per restart: keys a dead attempt left behind (Gloo's peer
    addresses) would otherwise make the restarted ranks dial processes that no longer exist."""
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # torchrun's agent serves it
    store = dist.TCPStore(host, port, world_size=env.world_size, is_master=not agent_store and env.rank == 0,
                          timeout=timeout, multi_tenant=not agent_store)
    return dist.PrefixStore(f"dlguide/attempt_{env.restart_count}", store)


def join_group(env: DistEnv, timeout_s: float = TIMEOUT_S) -> None:
    if torch.cuda.is_available() and env.local_rank < torch.cuda.device_count():
        torch.cuda.set_device(env.local_rank)
    timeout = timedelta(seconds=timeout_s)
    dist.init_process_group(process_group_backend(), store=_attempt_store(env, timeout), rank=env.rank,
                            world_size=env.world_size, timeout=timeout)
