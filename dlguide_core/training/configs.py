"""The run contract of every training recipe: the frozen config dataclasses with the guide's defaults,
what a run function is handed (RunContext) and what it returns (RunResult), and the one config error.

A run function has the signature `run(config, ctx: RunContext) -> RunResult`: it reports through
`ctx.sink`, checkpoints to `ctx.checkpoint_path`, resumes from it when `ctx.resume` is true, and returns
when done or when `ctx.sink.should_stop()`. Its `sink.on_start(...)` names the position it starts from
(`start_step`, `start_epoch`: 0 when new, the restored checkpoint's after a resume), so the store drops the
metrics the run is about to redo. The registry of recipes by name is `recipes.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from dlguide_core.training.fields import (
    DEVICE_CHOICES,
    MAX_STEPS,
    ConfigError,
    Flag,
    check_fields,
    choice,
    device_field,
    number,
    plain,
    whole,
)
from dlguide_core.training.sinks import TrainingSink
from dlguide_core.vision import architectures

AMP_DTYPES = ("bfloat16", "float16")
AMP_DTYPE_FLAGS = {"bf16": "bfloat16", "fp16": "float16"}  # `--amp-dtype` / the page's choice -> config value


@dataclass(frozen=True)
class TrainConfig:
    """Fields shared by the PyTorch recipes; each recipe subclass sets the guide's defaults."""

    # Every field declared once (training/fields.py): its range named in its message, its CLI flag.
    data: str = ""
    epochs: int = whole(90, "epochs", 1, 10_000, flag=Flag("N"))
    batch_size: int = whole(32, "batch size", 1, 65_536, flag=Flag("B"))
    lr: float = number(0.1, "learning rate", 0.0, 10.0, low_open=True, flag=Flag("LR"))
    momentum: float = number(0.9, "momentum", 0.0, 1.0)
    weight_decay: float = number(1e-4, "weight decay", 0.0, 1.0)
    lr_step_size: int = whole(30, "lr step size", 1, 10_000)
    lr_gamma: float = number(0.1, "lr gamma", 0.0, 1.0, low_open=True)
    image_size: int = whole(299, "image size", 1, 1024, flag=Flag("S", "train crop size (CPU smoke runs)"))
    weights: str = plain("imagenet", "weights", flag=Flag("imagenet|none|PATH"))  # or a dlguide checkpoint path
    workers: int = whole(4, "workers", 0, 64, flag=Flag("N", "DataLoader worker processes"),
                         form_label="Loader workers")
    device: str = device_field(flag=Flag(choices=DEVICE_CHOICES))  # auto, cpu, cuda or cuda:N (GPU N)
    # autocast on GPUs only; ignored on the CPU
    amp: bool = plain(False, "amp", flag=Flag(help="mixed precision on GPUs (autocast in --amp-dtype)"),
                      form_label="Mixed precision (GPU)")
    amp_dtype: str = choice("bfloat16", "amp dtype", AMP_DTYPES, flag=Flag(
        choices=tuple(AMP_DTYPE_FLAGS), values=AMP_DTYPE_FLAGS,
        help="autocast dtype with --amp: bf16 (default) or fp16 (with a gradient scaler)"),
        form_label="Mixed precision dtype")
    label_smoothing: float = number(0.0, "label smoothing", 0.0, 1.0, high_open=True, flag=Flag("X"))
    channels_last: bool = plain(False, "channels last", flag=Flag(
        help="NHWC memory format for the model and batches (faster convolutions with --amp on GPUs)"),
        form_label="channels_last")
    # stop (successfully) after this many global steps
    max_steps: int | None = whole(None, "max steps", 1, MAX_STEPS, flag=Flag("N", "stop after N optimiser steps"))
    seed: int = whole(0, "seed", 0, 2**32 - 1, flag=Flag("N"))
    checkpoint_minutes: float = number(5.0, "checkpoint minutes", 0.0, 1440.0, low_open=True)
    # Data-parallel training through torchrun (issue 6; docs/DISTRIBUTED.md): batch_size is per device.
    # processes (devices) on the job's machine
    nproc_per_node: int = whole(1, "processes per node", 1, 64, flag=Flag(
        "N", "processes (GPUs) on this machine; --batch-size is per process"), form_label="Devices: N")
    # machines; the others join with the command the Train page shows
    nnodes: int = whole(1, "nodes", 1, 4096, flag=Flag("M", "machines in the run"), form_label="Machines")
    # HOST:PORT every machine can reach, for nnodes > 1
    rdzv_endpoint: str = plain("", "rendezvous endpoint", flag=Flag(
        "HOST:PORT", "rendezvous on a machine all others reach"), form_label="Rendezvous HOST:PORT (this machine)")
    # torchrun restarts of the whole group, each resuming from the last checkpoint
    max_restarts: int = whole(0, "max restarts", 0, 100, flag=Flag(
        "R", "restart the group up to R times on a failure, resuming from the last checkpoint"),
        form_label="Max restarts (resume from checkpoint)")
    # batch-norm statistics over the global batch (GPUs only)
    sync_batchnorm: bool = plain(False, "sync batchnorm", flag=Flag(help="SyncBatchNorm across GPUs"),
                                 form_label="SyncBatchNorm")
    # the linear scaling rule: lr x world size; off = the lr as set
    scale_lr: bool = plain(False, "scale lr", flag=Flag(help="linear scaling rule: lr x number of processes"),
                           form_label="Linear scaling rule (lr × N)")

    def __post_init__(self) -> None:
        check_fields(self)  # every number in its range, amp dtype among its choices, the device rule
        _check(isinstance(self.weights, str) and bool(self.weights.strip()),
               "weights must be imagenet, none or a checkpoint path, not empty")
        if self.nnodes > 1 and self.rdzv_endpoint != RDZV_BY_SCHEDULER and (
                problem := rdzv_endpoint_problem(self.rdzv_endpoint)):
            raise ConfigError(problem)
        _check(not (self.sync_batchnorm and self.device == "cpu"),
               "sync batchnorm needs GPUs (NCCL/RCCL); turn it off for CPU runs")


# The rendezvous of a job a cluster scheduler runs: chosen when the job starts (its first node), not at submit.
RDZV_BY_SCHEDULER = "scheduler"


# A host name (letters, digits, `-` and `.`), an IPv4 address, or an IPv6 one in brackets.
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")


def rdzv_endpoint_problem(endpoint: str) -> str | None:
    """Why `endpoint` cannot be a multi-node run's rendezvous, or None: HOST:PORT, port 1-65535.
    The one check, used when a job is submitted (TrainConfig) and when torchrun is launched (LaunchSpec)."""
    host, _, port = endpoint.rpartition(":")
    if _HOST.fullmatch(host) and port.isdigit() and 0 < int(port) < 65536:  # no `;`, space or `$(...)` in it
        return None
    return (f"a multi-node run needs --rdzv-endpoint HOST:PORT (a machine of the run, reachable from all others, "
            f"e.g. node0.example:29400), not {endpoint!r}")


@dataclass(frozen=True)
class ArchitectureConfig(TrainConfig):
    """A recipe that trains one registered architecture (ARCH): its image size must suit it."""

    ARCH: ClassVar[str]  # the dlguide_core.vision.architectures name it trains (and the recipe's name)

    def __post_init__(self) -> None:
        super().__post_init__()
        problem = architectures.architecture(self.ARCH).size_problem(self.image_size)
        _check(problem is None, problem or "")


@dataclass(frozen=True)
class InceptionV3Config(ArchitectureConfig):
    """The guide's Inception v3 fine-tuning on tiny-imagenet-200 (torchvision reference defaults)."""

    ARCH: ClassVar[str] = architectures.INCEPTION_V3.name


@dataclass(frozen=True)
class ResNet50Config(ArchitectureConfig):
    """ResNet-50 fine-tuning on an ImageFolder dataset: the Inception recipe's defaults at 224 px."""

    ARCH: ClassVar[str] = architectures.RESNET50.name

    image_size: int = 224


@dataclass(frozen=True)
class CifarNetConfig(ArchitectureConfig):
    """The guide's small CNN on CIFAR-10: batch 4, SGD lr 0.001 momentum 0.9, 2 epochs."""

    ARCH: ClassVar[str] = architectures.CIFAR_NET.name

    epochs: int = 2
    batch_size: int = 4
    lr: float = 0.001
    weight_decay: float = 0.0
    lr_step_size: int = 30
    image_size: int = 32
    weights: str = "none"
    workers: int = 2


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass(frozen=True)
class RunContext:
    """What the job process hands a recipe's run function."""

    job_id: str
    recipe: str
    job_dir: Path
    sink: TrainingSink
    resume: bool = False  # continue from checkpoint_path
    slot: int = 0  # the job's first GPU among those this process sees (see dlguide_core.gpu_slots)
    dist: Any = None  # distributed.DistEnv when the job runs under torchrun (one per process)

    @property
    def checkpoint_path(self) -> Path:
        return self.job_dir / "checkpoint.pt"


@dataclass(frozen=True)
class RunResult:
    status: Literal["completed", "stopped"]
    step: int
    epoch: int
    checkpoint: Path | None = None
