"""What else ran on this host while a benchmark measured, so that a figure distorted by other work says so.

Three witnesses, sampled before and after each measurement (`benchmark.run_benchmark`):
- the other forwards of this process: every live forward of a served app passes the forward gate
  (`vision.classify.forward_slot`), which counts them (`forwards_started`); a benchmark's own timed runs call
  the backend directly and are not counted;
- the jobs running on this machine, from the job store when one exists (jobs.running_here; a benchmark never
  creates a store), sampled where the caller passes it (`watcher`): the CLI's `bench` and the Compiled page;
- the machine's own load (Linux): the CPU time every process used (/proc/stat) less this process's own
  (getrusage), over the measurement's wall time, in cores. It sees what the first two cannot: another server's
  booth visitors, a build, anything of anyone's (issue 43: five booth visitors doubled ONNX Runtime's latency
  with no note).
With a training job on a 2-core host, eager batch 1 read 5-20x its quiet latency (issue 31): such a row is
marked "disturbed: 1 running job, 3 other forwards" in the table and `bench` output, and a row measured while
other processes used at least OUTSIDE_LOAD_CORES on average: "other processes: 1.4 of 2 cores".
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
# Other processes' average load, in cores, from which a row is marked: the box's own daemons stay far below it
# (a quiet 2-core host read 0.01-0.05), one busy process reads about 1.
OUTSIDE_LOAD_CORES = 0.3
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (guest time is inside user)


@dataclass(frozen=True)
class CpuSample:
    """CPU time so far: every process's on this machine (busy, not idle or waiting on I/O), this process's own
    (every thread, user and system), and when it was read; `cores` as /proc/stat counts them."""

    machine_s: float
    own_s: float
    wall_s: float
    cores: int


def cpu_sample(stat: Path = PROC_STAT) -> CpuSample | None:
    """Now's CpuSample; None where there is no /proc/stat to read (not Linux)."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    total = next((line.split()[1:] for line in lines if line.startswith("cpu ")), None)
    if total is None:
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = sum(int(total[i]) for i in _BUSY_FIELDS if i < len(total)) / tick
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return CpuSample(busy, usage.ru_utime + usage.ru_stime, time.monotonic(), max(1, cores))


def outside_load(before: CpuSample | None, after: CpuSample | None) -> float:
    """Other processes' average load between two samples, in cores (0.0 when either is missing)."""
    if before is None or after is None or after.wall_s <= before.wall_s:
        return 0.0
    others = (after.machine_s - before.machine_s) - (after.own_s - before.own_s)
    return max(0.0, others / (after.wall_s - before.wall_s))


@dataclass(frozen=True)
class Activity:
    """A sample: forwards started in this process so far, the ids of jobs running on this machine, and the
    machine's CPU time (None: not sampled, or not Linux)."""

    forwards: int
    jobs: frozenset[str]
    cpu: CpuSample | None = None


@dataclass(frozen=True)
class Disturbance:
    """What ran beside one measurement: other forwards started, jobs running at its start or end, and other
    processes' average load in cores (of `cores`)."""

    forwards: int = 0
    jobs: int = 0
    outside_cores: float = 0.0
    cores: int = 0

    def describe(self) -> str | None:
        """"1 running job, 3 other forwards, other processes: 1.4 of 2 cores"; None when nothing else ran."""
        parts = []
        if self.jobs:
            parts.append(f"{self.jobs} running job{'s' if self.jobs != 1 else ''}")
        if self.forwards:
            parts.append(f"{self.forwards} other forward{'s' if self.forwards != 1 else ''}")
        if self.outside_cores >= OUTSIDE_LOAD_CORES:
            parts.append(f"other processes: {self.outside_cores:.1f} of {self.cores} cores")
        return ", ".join(parts) or None


def no_jobs() -> frozenset[str]:
    return frozenset()


def snapshot(jobs: Callable[[], frozenset[str]] = no_jobs) -> Activity:
    """Forwards started in this process, and the jobs `jobs()` finds running here (the inference layer knows no
    job store: callers that do pass `jobs.running_here.running_jobs_here`)."""
    from dlguide_core.vision.classify import forwards_started

    return Activity(forwards_started(), jobs(), cpu_sample())


def watcher(jobs: Callable[[], frozenset[str]]) -> Callable[[], Activity]:
    """A `run_benchmark(watch=...)` that also samples `jobs`."""
    return lambda: snapshot(jobs)


def between(before: Activity, after: Activity) -> Disturbance:
    return Disturbance(forwards=max(0, after.forwards - before.forwards), jobs=len(before.jobs | after.jobs),
                       outside_cores=round(outside_load(before.cpu, after.cpu), 2),
                       cores=after.cpu.cores if after.cpu else 0)
