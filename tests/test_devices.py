import json
import sys

import pytest

from dlguide_core import devices, smi
from tests.support.paths import SMI_FIXTURES

DATA = SMI_FIXTURES


def test_report_json_has_the_contract_keys():
    data = devices.collect(include_tensorflow=False).to_json()
    for key in ("torch", "backend", "devices", "migraphx", "onnxruntime_providers"):
        assert key in data
    assert data["backend"] in {"rocm", "cuda", "cpu"}
    assert isinstance(data["migraphx"], bool)
    assert isinstance(data["onnxruntime_providers"], list)
    for gpu in data["devices"]:
        assert set(gpu) >= {"index", "name", "total_memory_bytes"}
    json.dumps(data)  # serialisable as is


def test_install_checks_follow_the_guide():
    names = [c.name for c in devices.install_checks("cpu", ())]
    assert names[:2] == ["import torch", "GPU available"]
    gpu = devices.GpuInfo(0, "AMD Instinct MI300X", 192 * 2**30)
    checks = devices.install_checks("rocm", (gpu,))
    assert all(c.passed for c in checks)
    assert not devices.install_checks("cpu", ())[1].passed


def test_parse_rocm_smi_mi300x_uses_junction_when_edge_is_na():
    readings = smi.parse_rocm_smi((DATA / "rocm_smi_mi300x.json").read_text())
    assert [r.index for r in readings] == [0, 1]  # the "system" section is not a GPU
    assert readings[0].utilisation_percent == 37.0
    assert readings[0].temperature_c == 52.0
    assert readings[0].vram_total_bytes == 205822885888
    assert readings[1].vram_used_bytes == 285212672


def test_parse_rocm_smi_consumer_card_prefers_edge():
    (reading,) = smi.parse_rocm_smi((DATA / "rocm_smi_rx7900.json").read_text())
    assert reading.temperature_c == 63.0 and reading.utilisation_percent == 99.0
    assert reading.source == "rocm-smi"


def test_parse_amd_smi_units_and_na():
    readings = smi.parse_amd_smi((DATA / "amd_smi_metric.json").read_text())
    assert readings[0].temperature_c == 48.0  # edge is N/A: hotspot instead
    assert readings[0].vram_total_bytes == 196288 * 2**20
    assert readings[1].temperature_c == 35.0
    wrapped = json.dumps({"gpu_data": json.loads((DATA / "amd_smi_metric.json").read_text())})
    assert smi.parse_amd_smi(wrapped) == readings


@pytest.mark.parametrize(
    ("backend", "hip", "cuda", "name", "expected"),
    [
        ("rocm", "6.2.41133-dd7f95766", None, "AMD Instinct MI300X", "ROCm 6.2 · MI300X"),
        ("cuda", None, "12.4", "NVIDIA H100 80GB HBM3", "CUDA 12.4 · H100 80GB HBM3"),
    ],
)
def test_summary_label(backend, hip, cuda, name, expected):
    report = devices.DeviceReport("2.4", None, backend, hip, cuda, (devices.GpuInfo(0, name, 1),), False, "",
                                  (), None, ())
    assert devices.summary_label(report) == expected


def test_summary_label_cpu_only():
    report = devices.DeviceReport("2.4", None, "cpu", None, None, (), False, "", (), None, ())
    assert devices.summary_label(report) == "CPU only"


def test_missing_migraphx_is_a_state_not_an_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "migraphx", None)  # not importable, and nothing in the fallback folders
    monkeypatch.delenv("MIGRAPHX_PYTHONPATH", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    ok, detail = devices.migraphx_status()
    assert not ok and "not installed" in detail
