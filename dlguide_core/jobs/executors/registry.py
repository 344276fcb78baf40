"""The executors by name, declared once: `local` (the default), `slurm`, `ray`, one `ExecutorSpec` each.

Each spec names its class as "module:Class", imported on first use, so an executor whose module is missing or fails to
import is shown as unavailable with the reason rather than breaking every client. The CLI's `--executor`
choices, the Train page's "Run on" choice and the store's `executor` column all read `EXECUTORS`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any, NoReturn

from dlguide_core.errors import DlguideError
from dlguide_core.jobs.executors.base import (
    Availability,
    Executor,
    ExecutorUnavailable,
    ExternalStatus,
    NoOptions,
)
from dlguide_core.jobs.store import Job, JobStore


@dataclass(frozen=True)
class ExecutorSpec:
    """One executor, declared once (as inference.backend_specs.BackendSpec declares a backend): the name the
    store's `executor` column and `--executor` hold, the Train page's "Run on" label, and its class."""

    name: str
    label: str
    entry: str  # "module:Class", imported on first use

    def load(self) -> type[Executor[Any]]:
        module_name, _, class_name = self.entry.partition(":")
        cls: type[Executor[Any]] = getattr(importlib.import_module(module_name), class_name)
        return cls


DEFAULT = "local"
SPECS: tuple[ExecutorSpec, ...] = (
    ExecutorSpec("local", "This machine", "dlguide_core.jobs.executors.local:LocalExecutor"),
    ExecutorSpec("slurm", "Slurm", "dlguide_core.jobs.executors.slurm:SlurmExecutor"),
    ExecutorSpec("ray", "Ray", "dlguide_core.jobs.executors.ray:RayExecutor"),
)
EXECUTORS: dict[str, ExecutorSpec] = {spec.name: spec for spec in SPECS}


class UnknownExecutor(DlguideError):
    """An executor name that is not declared in EXECUTORS."""


@dataclass(frozen=True)
class ExecutorChoice:
    """One "Run on" option: its name, label, and whether it can be used here (and why not)."""

    name: str
    label: str
    ok: bool
    reason: str | None


class _Missing(Executor[NoOptions]):
    """An executor whose module could not be imported: unavailable, with the reason; it can do nothing else."""

    options_cls = NoOptions

    def __init__(self, name: str, reason: str) -> None:
        self.name, self._reason = name, reason  # type: ignore[misc]

    def available(self) -> Availability:
        return Availability(False, self._reason)

    def _refuse(self) -> NoReturn:
        raise ExecutorUnavailable(self._reason)

    def status(self, job: Job) -> ExternalStatus:
        self._refuse()

    def cancel(self, store: JobStore, job: Job) -> Job:
        self._refuse()

    def hand_over(self, store: JobStore, job: Job, options: NoOptions) -> Job:
        self._refuse()


def names() -> tuple[str, ...]:
    return tuple(EXECUTORS)


@cache
def get_executor(name: str) -> Executor[Any]:
    """The executor declared as `name` (one instance per process)."""
    if name not in EXECUTORS:
        raise UnknownExecutor(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    spec = EXECUTORS[name]
    try:
        cls = spec.load()
    except ModuleNotFoundError as exc:
        if exc.name != spec.entry.partition(":")[0]:
            raise
        return _Missing(name, f"the {name} executor is not built yet")
    return cls()


def choices() -> list[ExecutorChoice]:
    """Every executor with its availability (each check is quick: see Executor.available)."""
    out = []
    for spec in SPECS:
        ok, reason = get_executor(spec.name).available()
        out.append(ExecutorChoice(spec.name, spec.label, ok, reason))
    return out
