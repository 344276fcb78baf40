"""What accelerators PyTorch, ONNX Runtime, MIGraphX and TensorFlow see, and the guide's install checks.

Optional pieces are probed lazily; absence is reported as data, never raised.
TensorFlow is probed in a child process so it never shares GPU memory with torch here.

`collect` waits for every probe; dlguide_core.device_probes runs the slow ones in the background instead.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

import torch


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    total_memory_bytes: int


@dataclass(frozen=True)
class SmiReading:
    """One GPU's live reading from rocm-smi or amd-smi."""

    index: int
    utilisation_percent: float | None
    temperature_c: float | None
    vram_used_bytes: int | None
    vram_total_bytes: int | None
    source: str


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
    try:
        import onnxruntime
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


def smi_readings() -> tuple[SmiReading, ...]:
    """Live utilisation/temperature/VRAM from amd-smi or rocm-smi when either is on PATH."""
    if shutil.which("amd-smi"):
        text = _run_quiet(["amd-smi", "metric", "--json"])
        if text:
            return tuple(parse_amd_smi(text))
    if shutil.which("rocm-smi"):
        text = _run_quiet(["rocm-smi", "--showuse", "--showtemp", "--showmeminfo", "vram", "--json"])
        if text:
            return tuple(parse_rocm_smi(text))
    return ()


def _run_quiet(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _number(value: Any) -> float | None:
    if isinstance(value, dict):
        value = value.get("value")
    if value is None:
        return None
    try:
        return float(str(value).strip().rstrip("%").split()[0])
    except (ValueError, IndexError):
        return None  # "N/A" and friends


def parse_rocm_smi(text: str) -> list[SmiReading]:
    """Parse `rocm-smi --showuse --showtemp --showmeminfo vram --json` ({"card0": {...}, ...})."""
    data = json.loads(text)
    readings = []
    for card, values in data.items():
        if not card.startswith("card") or not isinstance(values, dict):
            continue  # "system" and other non-GPU sections
        # Edge first (consumer cards), then junction (MI-series report edge as N/A), then any sensor.
        temps = sorted((("edge" not in k.lower(), "junction" not in k.lower()), _number(v))
                       for k, v in values.items() if k.startswith("Temperature") and _number(v) is not None)
        used = _number(values.get("VRAM Total Used Memory (B)"))
        total = _number(values.get("VRAM Total Memory (B)"))
        readings.append(SmiReading(
            index=int(card[4:]), utilisation_percent=_number(values.get("GPU use (%)")),
            temperature_c=temps[0][1] if temps else None,
            vram_used_bytes=int(used) if used is not None else None,
            vram_total_bytes=int(total) if total is not None else None, source="rocm-smi"))
    return sorted(readings, key=lambda r: r.index)


_UNIT_BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}


def _bytes(value: Any) -> int | None:
    number = _number(value)
    if number is None:
        return None
    unit = str(value.get("unit", "B")).upper() if isinstance(value, dict) else "B"
    return int(number * _UNIT_BYTES.get(unit, 1))


def parse_amd_smi(text: str) -> list[SmiReading]:
    """Parse `amd-smi metric --json`: a list of GPUs, or {"gpu_data": [...]} in newer releases."""
    data = json.loads(text)
    gpus = data.get("gpu_data", []) if isinstance(data, dict) else data
    readings: list[SmiReading] = []
    for gpu in gpus:
        usage = gpu.get("usage") or {}
        temp = gpu.get("temperature") or {}
        mem = gpu.get("mem_usage") or {}
        readings.append(SmiReading(
            index=int(gpu.get("gpu", len(readings))),
            utilisation_percent=_number(usage.get("gfx_activity")),
            temperature_c=_number(temp.get("edge")) if _number(temp.get("edge")) is not None
            else _number(temp.get("hotspot")),
            vram_used_bytes=_bytes(mem.get("used_vram")), vram_total_bytes=_bytes(mem.get("total_vram")),
            source="amd-smi"))
    return sorted(readings, key=lambda r: r.index)


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
        import torchvision
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
