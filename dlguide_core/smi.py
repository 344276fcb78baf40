"""Live GPU readings (utilisation, temperature, VRAM) from amd-smi or rocm-smi, parsed from their JSON.

Absent tools and "N/A" values are data (None or no readings), never raised. No torch here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SmiReading:
    """One GPU's live reading from rocm-smi or amd-smi."""

    index: int
    utilisation_percent: float | None
    temperature_c: float | None
    vram_used_bytes: int | None
    vram_total_bytes: int | None
    source: str



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
