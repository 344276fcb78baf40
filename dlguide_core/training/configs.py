"""The run contract of every training recipe: the frozen config dataclasses with the guide's defaults,
what a run function is handed (RunContext) and what it returns (RunResult), and the one config error.

A run function has the signature `run(config, ctx: RunContext) -> RunResult`: it reports through
`ctx.sink`, checkpoints to `ctx.checkpoint_path`, resumes from it when `ctx.resume` is true, and returns
when done or when `ctx.sink.should_stop()`. Its `sink.on_start(...)` names the position it starts from
(`start_step`, `start_epoch`: 0 when new, the restored checkpoint's after a resume), so the store drops the
metrics the run is about to redo. The registry of recipes by name is `recipes.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from dlguide_core.errors import DlguideError
from dlguide_core.training.sinks import TrainingSink

DEVICE_CHOICES = ("auto", "cpu", "cuda")
AMP_DTYPES = ("bfloat16", "float16")
AMP_DTYPE_FLAGS = {"bf16": "bfloat16", "fp16": "float16"}  # `--amp-dtype` / the page's choice -> config value


@dataclass(frozen=True)
class TrainConfig:
    """Fields shared by the PyTorch recipes; each recipe subclass sets the guide's defaults."""

    data: str = ""
    epochs: int = 90
    batch_size: int = 32
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    lr_step_size: int = 30
    lr_gamma: float = 0.1
    image_size: int = 299
    weights: str = "imagenet"  # "imagenet", "none" or a dlguide checkpoint path
    workers: int = 4
    device: str = "auto"  # auto, cpu, cuda or cuda:N
    amp: bool = False  # autocast on GPUs only; ignored on the CPU
    amp_dtype: str = "bfloat16"
    label_smoothing: float = 0.0
    channels_last: bool = False
    max_steps: int | None = None  # stop (successfully) after this many global steps
    seed: int = 0
    checkpoint_minutes: float = 5.0
    # Data-parallel training through torchrun (issue 6; docs/DISTRIBUTED.md): batch_size is per device.
    nproc_per_node: int = 1  # processes (devices) on the job's machine
    nnodes: int = 1  # machines; the others join with the command the Train page shows
    rdzv_endpoint: str = ""  # HOST:PORT every machine can reach, for nnodes > 1
    max_restarts: int = 0  # torchrun restarts of the whole group, each resuming from the last checkpoint
    sync_batchnorm: bool = False  # batch-norm statistics over the global batch (GPUs only)
    scale_lr: bool = False  # the linear scaling rule: lr x world size; off = the lr as set

    def __post_init__(self) -> None:
        # Every number in a range named in its message: refused at submit, not hours later in the job.
        for name, label, low, high in INT_RANGES:
            _check_range(label, getattr(self, name), low, high, whole=True)
        for name, label, bottom, top, open_low in FLOAT_RANGES:
            _check_range(label, getattr(self, name), bottom, top, whole=False, open_low=open_low)
        if self.max_steps is not None:
            _check_range("max steps", self.max_steps, 1, MAX_STEPS, whole=True)
        _check(0.0 <= self.label_smoothing < 1.0, "label smoothing must be in [0, 1)")
        _check(self.amp_dtype in AMP_DTYPES, f"amp dtype must be one of {', '.join(AMP_DTYPES)}")
        base = self.device.split(":")[0]
        _check(base in DEVICE_CHOICES, f"device must be one of {', '.join(DEVICE_CHOICES)} (or cuda:N)")
        _check(isinstance(self.weights, str) and bool(self.weights.strip()),
               "weights must be imagenet, none or a checkpoint path, not empty")
        if self.nnodes > 1 and self.rdzv_endpoint != RDZV_BY_SCHEDULER and (
                problem := rdzv_endpoint_problem(self.rdzv_endpoint)):
            raise ConfigError(problem)
        _check(not (self.sync_batchnorm and base == "cpu"),
               "sync batchnorm needs GPUs (NCCL/RCCL); turn it off for CPU runs")


# The rendezvous of a job a cluster scheduler runs: chosen when the job starts (its first node), not at submit.
RDZV_BY_SCHEDULER = "scheduler"
MAX_STEPS = 10**9
# (field, what the message calls it, lowest, highest): whole numbers
INT_RANGES = (
    ("epochs", "epochs", 1, 10_000), ("batch_size", "batch size", 1, 65_536),
    ("lr_step_size", "lr step size", 1, 10_000), ("image_size", "image size", 1, 1024),
    ("workers", "workers", 0, 64), ("seed", "seed", 0, 2**32 - 1),
    ("nproc_per_node", "processes per node", 1, 64), ("nnodes", "nodes", 1, 4096),
    ("max_restarts", "max restarts", 0, 100),
)
# (field, message name, lowest, highest, lowest excluded): finite numbers
FLOAT_RANGES = (
    ("lr", "learning rate", 0.0, 10.0, True), ("momentum", "momentum", 0.0, 1.0, False),
    ("weight_decay", "weight decay", 0.0, 1.0, False), ("lr_gamma", "lr gamma", 0.0, 1.0, True),
    ("label_smoothing", "label smoothing", 0.0, 1.0, False),
    ("checkpoint_minutes", "checkpoint minutes", 0.0, 1440.0, True),
)


def _check_range(label: str, value: Any, low: float, high: float, *, whole: bool, open_low: bool = False) -> None:
    ok_type = isinstance(value, int) if whole else isinstance(value, (int, float))
    ok = ok_type and not isinstance(value, bool) and math.isfinite(value) and (
        low < value <= high if open_low else low <= value <= high)
    if not ok:
        span = f"({low:g}, {high:g}]" if open_low else f"[{low:g}, {high:g}]"
        kind = "a whole number" if whole else "a number"
        raise ConfigError(f"{label} must be {kind} in {span}, not {value!r}")


def rdzv_endpoint_problem(endpoint: str) -> str | None:
    """Why `endpoint` cannot be a multi-node run's rendezvous, or None: HOST:PORT, port 1-65535.
    The one check, used when a job is submitted (TrainConfig) and when torchrun is launched (LaunchSpec)."""
    host, _, port = endpoint.rpartition(":")
    if host and not any(c.isspace() for c in endpoint) and port.isdigit() and 0 < int(port) < 65536:
        return None
    return (f"a multi-node run needs --rdzv-endpoint HOST:PORT (a machine of the run, reachable from all others, "
            f"e.g. node0.example:29400), not {endpoint!r}")


@dataclass(frozen=True)
class InceptionV3Config(TrainConfig):
    """The guide's Inception v3 fine-tuning on tiny-imagenet-200 (torchvision reference defaults)."""

    ARCH: ClassVar[str] = "inception_v3"  # the dlguide_core.vision.models architecture it trains

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.image_size >= 75, "Inception v3 needs an image size of at least 75")


@dataclass(frozen=True)
class CifarNetConfig(TrainConfig):
    """The guide's small CNN on CIFAR-10: batch 4, SGD lr 0.001 momentum 0.9, 2 epochs."""

    ARCH: ClassVar[str] = "cifar_net"

    epochs: int = 2
    batch_size: int = 4
    lr: float = 0.001
    weight_decay: float = 0.0
    lr_step_size: int = 30
    image_size: int = 32
    weights: str = "none"
    workers: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.image_size == 32, "cifar_net is built for 32x32 images")


class ConfigError(DlguideError, ValueError):
    """A recipe field with a value the recipe cannot use."""


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
