"""The device report without waiting: the slow probes of dlguide_core.devices (MIGraphX, rocm-smi/amd-smi,
TensorFlow in a child process: seconds, 14 s on a busy machine) run once per process in background threads, and
`probe_report` returns the report as far as they have got, naming the ones still running. The Devices page draws
at once and fills in as they finish."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import torch

from dlguide_core import devices
from dlguide_core.smi import smi_readings

MIGRAPHX_PROBE, SMI_PROBE, TF_PROBE = "migraphx_lib", "smi", "tensorflow"  # a probe is named for what it loads
SLOW_PROBES = (MIGRAPHX_PROBE, SMI_PROBE, TF_PROBE)  # what probe_report runs in the background


@dataclass(frozen=True)
class ProbedReport:
    """The device report as far as the background probes have got: the fields of the probes named in
    `pending` still hold their empty values (no MIGraphX, no readings, no TensorFlow) and must not be shown."""

    report: devices.DeviceReport
    pending: frozenset[str]

    @property
    def done(self) -> bool:
        return not self.pending


class BackgroundProbes:
    """Each slow probe runs once in a daemon thread (a TensorFlow probe never holds up the process's exit);
    `start(name, fn, again=True)` runs a finished probe again (the Devices page's Refresh)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[str, Future] = {}

    def start(self, name: str, fn: Callable[[], Any], *, again: bool = False) -> Future:
        with self._lock:
            future = self._futures.get(name)
            if future is None or (again and future.done()):
                future = self._futures[name] = Future()
                threading.Thread(target=self._run, args=(future, fn), name=f"dlguide-probe-{name}",
                                 daemon=True).start()
            return future

    @staticmethod
    def _run(future: Future, fn: Callable[[], Any]) -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn())
        except Exception as exc:  # noqa: BLE001 - a probe that breaks is reported as data, never raised
            future.set_exception(exc)


_BACKGROUND = BackgroundProbes()


def _migraphx_probe() -> tuple[bool, str, dict[str, devices.MigraphxTarget]]:
    ok, detail = devices.migraphx_status()
    return ok, detail, devices.migraphx_targets()


def _finished(future: Future, failed: Callable[[str], Any]) -> Any:
    exc = future.exception()
    return failed(f"{type(exc).__name__}: {exc}") if exc is not None else future.result()


def probe_report(*, include_tensorflow: bool = True, again: bool = False) -> ProbedReport:
    """The report without waiting for the slow probes (SLOW_PROBES, started here on first call and run once
    per process; `again` reruns the finished ones): the fast fields now, the slow ones once finished."""
    slow: dict[str, Callable[[], Any]] = {MIGRAPHX_PROBE: _migraphx_probe, SMI_PROBE: smi_readings}
    if include_tensorflow:
        slow[TF_PROBE] = devices.tensorflow_info
    futures = {name: _BACKGROUND.start(name, fn, again=again) for name, fn in slow.items()}
    pending = frozenset(name for name, future in futures.items() if not future.done())
    mgx_ok, mgx_detail, targets = False, "probing…", {}
    if MIGRAPHX_PROBE not in pending:
        mgx_ok, mgx_detail, targets = _finished(futures[MIGRAPHX_PROBE],
                                                lambda why: (False, f"probe failed: {why}", {}))
    smi = () if SMI_PROBE in pending else _finished(futures[SMI_PROBE], lambda why: ())
    tf = None
    if include_tensorflow and TF_PROBE not in pending:
        tf = _finished(futures[TF_PROBE], lambda why: {"error": f"TensorFlow probe failed: {why}"})
    backend = devices.torch_backend()
    gpus = devices.list_gpus()
    report = devices.DeviceReport(
        torch=torch.__version__, torchvision=devices.torchvision_version(), backend=backend,
        hip_version=getattr(torch.version, "hip", None), cuda_version=torch.version.cuda if backend == "cuda" else None,
        devices=gpus, migraphx=mgx_ok, migraphx_detail=mgx_detail,
        onnxruntime_providers=devices.onnxruntime_providers(), tensorflow=tf, smi=smi,
        checks=devices.install_checks(backend, gpus), migraphx_targets=targets)
    return ProbedReport(report, pending)
