"""dlguide_core.device_probes: the report never waits for the slow probes, and a probe that breaks is data."""

import threading
import time

from dlguide_core import device_probes, devices


def test_probe_report_never_waits_and_a_broken_probe_is_data(monkeypatch):
    monkeypatch.setattr(device_probes, "_BACKGROUND", device_probes.BackgroundProbes())
    release = threading.Event()
    monkeypatch.setattr(devices, "tensorflow_info", lambda: release.wait(60) and {"version": "1"})

    def broken():
        raise OSError("no such library")

    monkeypatch.setattr(device_probes, "_migraphx_probe", broken)
    started = time.monotonic()
    first = device_probes.probe_report(include_tensorflow=True)
    assert time.monotonic() - started < 30 and "tensorflow" in first.pending and first.report.tensorflow is None
    release.set()
    deadline = time.monotonic() + 10
    while not device_probes.probe_report(include_tensorflow=True).done:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    done = device_probes.probe_report(include_tensorflow=True)
    assert done.done and done.report.tensorflow == {"version": "1"}
    assert not done.report.migraphx and "no such library" in done.report.migraphx_detail
