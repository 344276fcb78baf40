import threading
import time

import pytest
import torch

from dlguide_core import device_probes, devices
from tests.support.apptest import open_app


@pytest.fixture
def fresh_probes(monkeypatch: pytest.MonkeyPatch) -> device_probes.BackgroundProbes:
    """A probe runner of this test's own: no probe finished by an earlier test."""
    probes = device_probes.BackgroundProbes()
    monkeypatch.setattr(device_probes, "_BACKGROUND", probes)
    return probes


def _wait_done(timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not device_probes.probe_report(include_tensorflow=True).done:
        assert time.monotonic() < deadline, "the background probes never finished"
        time.sleep(0.1)


def test_devices_page_renders_report_and_checks(fresh_probes):
    at = open_app("pages/devices.py")
    _wait_done()
    at.run()
    assert not at.exception
    assert at.title[0].value == "Devices"
    tables = {tuple(df.value.columns): df.value for df in at.dataframe}
    checks = tables[("check", "result", "detail")]
    assert list(checks["check"])[:2] == ["import torch", "GPU available"]
    assert at.subheader[0].value == "CPU only" or at.subheader[0].value.startswith(("ROCm", "CUDA"))
    runtimes = tables[("runtime", "available", "detail")]
    assert list(runtimes["runtime"]) == ["MIGraphX", "ONNX Runtime", "zentorch"]  # issue 31: zentorch listed
    for runtime, detail in zip(runtimes["runtime"], runtimes["detail"]):  # long reasons also shown whole
        assert len(detail) <= 60 or any(c.value == f"**{runtime}**: {detail}" for c in at.caption)
    assert any("TensorFlow" in s.value for s in at.subheader)


def test_the_page_draws_before_the_slow_probes_finish_and_fills_in_after(fresh_probes, monkeypatch):
    release = threading.Event()

    def slow_tensorflow():
        release.wait(60)
        return {"version": "9.9.9", "devices": [{"name": "/physical_device:CPU:0", "type": "CPU"}],
                "built_with_rocm": False, "built_with_cuda": False}

    def slow_migraphx():
        release.wait(60)
        return True, "migraphx 9.9 from a stand-in", {}

    monkeypatch.setattr(devices, "tensorflow_info", slow_tensorflow)
    monkeypatch.setattr(device_probes, "_migraphx_probe", slow_migraphx)
    at = open_app("pages/devices.py")  # returns while both probes wait (they would wait 60 s)
    assert not release.is_set() and not at.exception
    assert at.title[0].value == "Devices"
    assert list(at.dataframe[0].value["check"])[:2] == ["import torch", "GPU available"]
    probing = [i.value for i in at.info if "probing…" in i.value]
    assert [p.split(":")[0] for p in probing] == ["MIGraphX", "TensorFlow"]
    assert "9.9.9" not in " ".join(m.value for m in at.markdown)

    release.set()
    _wait_done(10)
    at.run()
    assert not at.exception
    assert not [i.value for i in at.info if "probing…" in i.value]
    assert any("TensorFlow 9.9.9" in m.value for m in at.markdown)
    runtimes = {tuple(df.value.columns): df.value for df in at.dataframe}[("runtime", "available", "detail")]
    assert list(runtimes["runtime"]) == ["MIGraphX", "ONNX Runtime", "zentorch"]  # issue 31: zentorch listed
    for runtime, detail in zip(runtimes["runtime"], runtimes["detail"]):  # long reasons also shown whole
        assert len(detail) <= 60 or any(c.value == f"**{runtime}**: {detail}" for c in at.caption)
    assert runtimes["detail"][0] == "migraphx 9.9 from a stand-in"


def test_the_torch_version_is_shown_whole_with_its_build_in_the_label(fresh_probes, monkeypatch: pytest.MonkeyPatch):
    """Issue 43's walk: "2.14.1+cu…" was cut in its box; a ROCm build ("2.6.0+rocm6.4.3") is longer still."""
    monkeypatch.setattr(torch, "__version__", "2.6.0+rocm6.4.3")
    at = open_app("pages/devices.py")
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown["PyTorch (rocm6.4.3 build)"] == "2.6.0"
