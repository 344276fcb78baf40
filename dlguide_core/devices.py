"""What accelerators PyTorch, ONNX Runtime, MIGraphX and TensorFlow see, and the guide's install checks.

Optional pieces are probed lazily; absence is reported as data, never raised.
TensorFlow is probed in a child process so it never shares GPU memory with torch here.

`collect` waits for every probe; dlguide_core.device_probes runs the slow ones in the background instead.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

import torch

from dlguide_core.smi import SmiReading, smi_readings


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    total_memory_bytes: int


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


class TensorflowDevice(TypedDict):
    name: str  # "/physical_device:GPU:0"
    type: str  # "CPU", "GPU"


class TensorflowInfo(TypedDict, total=False):  # `devices --json`'s "tensorflow": the four keys, or "error" alone
    version: str
    devices: list[TensorflowDevice]
    built_with_rocm: bool
    built_with_cuda: bool
    error: str


class MigraphxTarget(TypedDict):  # what one MIGraphX target runs here (`devices --json`'s "migraphx_targets")
    precisions: list[str]
    exhaustive_tune: bool
    error: str | None


@dataclass(frozen=True)
class DeviceReport:
    torch: str
    torchvision: str | None
    backend: str  # "rocm", "cuda" or "cpu"
    hip_version: str | None
    cuda_version: str | None
    devices: tuple[GpuInfo, ...]
    migraphx: bool
    migraphx_detail: str
    onnxruntime_providers: tuple[str, ...]
    tensorflow: TensorflowInfo | None
    smi: tuple[SmiReading, ...]
    checks: tuple[Check, ...] = field(default=())
    migraphx_targets: dict[str, MigraphxTarget] = field(default_factory=dict)  # by target: gpu, cpu

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("devices", "onnxruntime_providers", "smi", "checks"):
            data[key] = list(data[key])
        return data


def torch_backend() -> str:
    if getattr(torch.version, "hip", None):
        return "rocm"
    if torch.version.cuda and torch.cuda.is_available():
        return "cuda"
    return "cpu"


def best_device() -> torch.device:
    # ROCm builds expose AMD GPUs through the torch.cuda API.
    return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def list_gpus() -> tuple[GpuInfo, ...]:
    if not torch.cuda.is_available():
        return ()
    gpus = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gpus.append(GpuInfo(i, props.name, int(props.total_memory)))
    return tuple(gpus)


def migraphx_status() -> tuple[bool, str]:
    """Whether MIGraphX's Python module loads (importable, MIGRAPHX_PYTHONPATH, then $ROCM_PATH/lib) and
    where from, or what each place gave; without an AMD GPU the detail names the cpu target dlguide uses."""
    from dlguide_core import migraphx_lib

    ok, detail = migraphx_lib.status()
    if ok and not Path("/dev/kfd").exists():
        detail += "; no AMD GPU (/dev/kfd missing): the cpu target is offered instead, as MIGraphX (CPU)"
    return ok, detail


def migraphx_targets() -> dict[str, MigraphxTarget]:
    """What each MIGraphX target runs here (probed once per process), or {} when MIGraphX does not load."""
    from dlguide_core import migraphx_lib

    if not migraphx_lib.status()[0]:
        return {}
    out = {}
    for target in ("gpu", "cpu"):
        support = migraphx_lib.target_support(target)
        out[target] = MigraphxTarget(precisions=list(support.precisions), exhaustive_tune=support.exhaustive_tune,
                                     error=support.error)
    return out


def onnxruntime_providers() -> tuple[str, ...]:
    from dlguide_core import onnxruntime_lib

    try:
        onnxruntime = onnxruntime_lib.load()
    except ImportError:
        return ()
    return tuple(onnxruntime.get_available_providers())


_TF_PROBE = (
    "import json, os; os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3');"
    "import tensorflow as tf;"
    "print(json.dumps({'version': tf.__version__,"
    "'devices': [{'name': d.name, 'type': d.device_type} for d in tf.config.list_physical_devices()],"
    "'built_with_rocm': bool(tf.test.is_built_with_rocm()),"
    "'built_with_cuda': bool(tf.test.is_built_with_cuda())}))"
)


@lru_cache(maxsize=1)
def tensorflow_info(timeout: float = 120.0) -> TensorflowInfo | None:
    """TensorFlow's version and devices from a child process; None when TF is not installed."""
    if importlib.util.find_spec("tensorflow") is None:
        return None
    try:
        out = subprocess.run([sys.executable, "-c", _TF_PROBE], capture_output=True, text=True,
                             timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"TensorFlow probe timed out after {timeout:.0f} s"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"import tensorflow failed: {tail[:200]}"}
    info: TensorflowInfo = json.loads(lines[-1])  # the probe's four keys (_TF_PROBE)
    return info


def install_checks(backend: str, gpus: tuple[GpuInfo, ...]) -> tuple[Check, ...]:
    """The guide's checks: `import torch` works, and a GPU is available to it."""
    gpu_ok = bool(gpus)
    detail = (f"torch.cuda.is_available() is True ({len(gpus)} device(s), {backend})" if gpu_ok
              else "torch.cuda.is_available() is False: PyTorch will run on the CPU")
    checks = [
        Check("import torch", True, f"torch {torch.__version__}"),
        Check("GPU available", gpu_ok, detail),
    ]
    if backend == "rocm":
        checks.append(Check("ROCm build of PyTorch", True, f"HIP {torch.version.hip}"))
    return tuple(checks)


def collect(*, include_tensorflow: bool = True) -> DeviceReport:
    backend = torch_backend()
    gpus = list_gpus()
    mgx_ok, mgx_detail = migraphx_status()
    return DeviceReport(
        torch=torch.__version__, torchvision=torchvision_version(), backend=backend,
        hip_version=getattr(torch.version, "hip", None), cuda_version=torch.version.cuda if backend == "cuda" else None,
        devices=gpus, migraphx=mgx_ok, migraphx_detail=mgx_detail,
        onnxruntime_providers=onnxruntime_providers(),
        tensorflow=tensorflow_info() if include_tensorflow else None,
        smi=smi_readings(), checks=install_checks(backend, gpus), migraphx_targets=migraphx_targets())


def torchvision_version() -> str | None:
    try:
        from dlguide_core.torchvision_lib import torchvision
    except ImportError:
        return None
    return torchvision.__version__


def summary_label(report: DeviceReport) -> str:
    """Short sidebar text: "ROCm 6.2 · MI300X", "CUDA 12.4 · H100", "CPU only"."""
    if not report.devices:
        return "CPU only"
    name = report.devices[0].name.replace("AMD Instinct ", "").replace("NVIDIA ", "")
    more = f" ×{len(report.devices)}" if len(report.devices) > 1 else ""
    if report.backend == "rocm":
        version = ".".join((report.hip_version or "").split(".")[:2])
        return f"ROCm {version} · {name}{more}".replace("ROCm  ·", "ROCm ·")
    version = ".".join((report.cuda_version or "").split(".")[:2])
    return f"CUDA {version} · {name}{more}".replace("CUDA  ·", "CUDA ·")
