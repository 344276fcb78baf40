"""What every bench script shares: its command line, the alternating rounds, and the one result record.

How bench scripts run: as modules, from the project root, so the project (dlguide_core, serve, web, tests.support)
is importable without touching sys.path:

    .venv/bin/python -m bench.bench_classify [--quick] [--json out.json]

A bench script imports the project, `bench.common` and `tests.support.*` (the plumbing: servers, ports, chromium,
CPU and RSS accounting, percentiles, booth visitors), never another bench script nor `tests.conftest`.

Every script takes `--quick` (the smallest run that still goes through every step; tests/test_benches.py runs each
one that way in `make test`) and `--json PATH` (the Result written there). A script whose needs are missing here
(a GPU, docker, Slurm, PostgreSQL, chromium) calls `skip(reason)`: one "SKIP: reason" line, exit status 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import NoReturn, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Result:
    """One bench run: what was measured (`metrics`), by which command, on which machine, when."""

    name: str  # the script's module name, e.g. "bench_classify"
    machine: str  # machine(): CPU, cores, memory, GPU
    date: str  # UTC, ISO 8601 to the minute
    command: str  # the exact command line that produced it
    metrics: Mapping[str, object] = field(default_factory=dict)  # figures (numbers, labels, lists, tables)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str)


def machine() -> str:
    """This machine in one line: CPU model, logical cores, memory, accelerator (or "no GPU")."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        memory = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        memory = "memory unknown"
    return f"{cpu}, {os.cpu_count()} CPUs, {memory}, {accelerator()}"


def accelerator() -> str:
    """The GPU torch sees, else "no GPU" (torch is imported only when a script has already imported it)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return f"GPU {torch.cuda.get_device_name(0)}"
    return "no GPU" if torch is not None else "GPU not probed"


def command() -> str:
    """The command line as run: `python -m bench.NAME ARGS` for a module run."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    head = ["python", "-m", spec.name] if spec is not None and spec.name else ["python", *sys.argv[:1]]
    return shlex.join([*head, *sys.argv[1:]])


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def result(name: str, metrics: Mapping[str, object]) -> Result:
    """A Result for this run, with machine, date and command filled in."""
    return Result(name=name, machine=machine(), date=now(), command=command(), metrics=dict(metrics))


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser described by the script's docstring, with --quick and --json already on it."""
    made = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0] if doc else None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    made.add_argument("--quick", action="store_true",
                      help="the smallest run that goes through every step (make test runs every bench this way)")
    made.add_argument("--json", type=Path, default=None, help="also write the result record to this file")
    return made


def report(outcome: Result, json_path: Path | None = None) -> None:
    """Print the record (a header line, then its metrics as JSON) and write it to `json_path` when given."""
    print(f"# {outcome.name}: {outcome.machine}; {outcome.date}\n# {outcome.command}")
    print(json.dumps(dict(outcome.metrics), indent=2, default=str))
    if json_path is not None:
        json_path.write_text(outcome.to_json() + "\n")


def skip(reason: str) -> NoReturn:
    """Leave without measuring: one "SKIP: reason" line, exit status 0 (what --quick does where a need is absent)."""
    print(f"SKIP: {reason}", flush=True)
    raise SystemExit(0)


def alternate(variants: Mapping[str, Callable[[], T]], rounds: int,
              on_round: Callable[[int, dict[str, list[T]]], None] | None = None) -> dict[str, list[T]]:
    """Run every variant once per round, the order reversed every other round (A B C, C B A, ...), so drift in
    the machine's load hits every variant alike. Returns each variant's outcomes in round order; `on_round(index,
    outcomes so far)` after each round (a progress line)."""
    outcomes: dict[str, list[T]] = {name: [] for name in variants}
    names = list(variants)
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            outcomes[name].append(variants[name]())
        if on_round is not None:
            on_round(index, outcomes)
    return outcomes
