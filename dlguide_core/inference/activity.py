"""What else ran on this host while a benchmark measured, so that a figure distorted by other work says so.

Two witnesses, sampled before and after each measurement (`benchmark.run_benchmark`):
- the other forwards of this process: every live forward of a served app passes the forward gate
  (`vision.classify.forward_slot`), which counts them (`forwards_started`); a benchmark's own timed runs call
  the backend directly and are not counted;
- the jobs running on this machine, from the job store when one exists (jobs.running_here; a benchmark never
  creates a store), sampled where the caller passes it (`watcher`): the CLI's `bench` and the Compiled page.
With a training job on a 2-core host, eager batch 1 read 5-20x its quiet latency (issue 31): such a row is
marked "disturbed: 1 running job, 3 other forwards" in the table and `bench` output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Activity:
    """A sample: forwards started in this process so far, and the ids of jobs running on this machine."""

    forwards: int
    jobs: frozenset[str]


@dataclass(frozen=True)
class Disturbance:
    """What ran beside one measurement: other forwards started, and jobs running at its start or end."""

    forwards: int = 0
    jobs: int = 0

    def describe(self) -> str | None:
        """"1 running job, 3 other forwards"; None when nothing else ran."""
        parts = []
        if self.jobs:
            parts.append(f"{self.jobs} running job{'s' if self.jobs != 1 else ''}")
        if self.forwards:
            parts.append(f"{self.forwards} other forward{'s' if self.forwards != 1 else ''}")
        return ", ".join(parts) or None


def no_jobs() -> frozenset[str]:
    return frozenset()


def snapshot(jobs: Callable[[], frozenset[str]] = no_jobs) -> Activity:
    """Forwards started in this process, and the jobs `jobs()` finds running here (the inference layer knows no
    job store: callers that do pass `jobs.running_here.running_jobs_here`)."""
    from dlguide_core.vision.classify import forwards_started

    return Activity(forwards_started(), jobs())


def watcher(jobs: Callable[[], frozenset[str]]) -> Callable[[], Activity]:
    """A `run_benchmark(watch=...)` that also samples `jobs`."""
    return lambda: snapshot(jobs)


def between(before: Activity, after: Activity) -> Disturbance:
    return Disturbance(forwards=max(0, after.forwards - before.forwards), jobs=len(before.jobs | after.jobs))
