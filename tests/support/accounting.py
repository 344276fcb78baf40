"""What a process tree costs: CPU seconds and resident memory (a process and every process it started, alive
now), sampled in the background if asked, and the percentiles the benches report."""

from __future__ import annotations

import math
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import psutil


def tree(pid: int | psutil.Process) -> list[psutil.Process]:
    """The process and its descendants now."""
    root = pid if isinstance(pid, psutil.Process) else psutil.Process(pid)
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return [root]


def cpu_s(pid: int | psutil.Process, children: bool = True) -> float:
    """CPU seconds (user + system) of the process and (unless `children=False`) every process it started, alive
    now."""
    total = 0.0
    for proc in tree(pid) if children else tree(pid)[:1]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def rss_mib(pid: int | psutil.Process, children: bool = True) -> float:
    """Resident memory in MiB of the process (and, unless `children=False`, of every process it started)."""
    total = 0
    for proc in tree(pid) if children else tree(pid)[:1]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**20


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation, as numpy's default; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


@dataclass
class Samples:
    """RSS (MiB) read every `every_s` while a `sampling` block runs."""

    values: list[float] = field(default_factory=list)

    def quartiles(self) -> list[float]:
        """The samples at 0, 25, 50, 75 and 100 % of the run: a plateau is allocator warm-up, a slope a leak."""
        if not self.values:
            return []
        last = len(self.values) - 1
        return [self.values[min(last, int(q * last))] for q in (0, 0.25, 0.5, 0.75, 1.0)]


@contextmanager
def sampling_rss(pid: int | psutil.Process, every_s: float = 1.0, children: bool = False) -> Iterator[Samples]:
    """Sample the process's RSS on a background thread for the block's duration."""
    samples, done = Samples(), threading.Event()

    def sample() -> None:
        while not done.wait(every_s):
            try:
                samples.values.append(rss_mib(pid, children=children))
            except psutil.NoSuchProcess:
                return

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join()


def gpu_utilisation() -> float | None:
    """The busiest GPU's utilisation now (nvidia-smi, else amd-smi/rocm-smi), None where there is none."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        values = [float(v) for v in out.split() if v.replace(".", "", 1).isdigit()]
        return max(values) if values else None
    from dlguide_core.smi import smi_readings

    values = [r.utilisation_percent for r in smi_readings() if r.utilisation_percent is not None]
    return max(values) if values else None


def sample_gpu(samples: list[float], done: threading.Event, every_s: float = 0.5) -> None:
    while not done.wait(every_s):
        value = gpu_utilisation()
        if value is None:
            return  # no GPU tool here
        samples.append(value)
