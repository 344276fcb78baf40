"""The executors by name, declared once: `local` (the default), `slurm`, `ray`.

Each entry is "module:Class", imported on first use, so an executor whose module is missing or fails to
import is shown as unavailable with the reason rather than breaking every client. The CLI's `--executor`
choices, the Train page's "Run on" choice and the store's `executor` column all read `EXECUTORS`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

from dlguide_core.errors import DlguideError
from dlguide_core.jobs.executors.base import Availability, Executor

DEFAULT = "local"
EXECUTORS: dict[str, tuple[str, str]] = {  # name -> (label on the Train page, "module:Class")
    "local": ("This machine", "dlguide_core.jobs.executors.local:LocalExecutor"),
    "slurm": ("Slurm", "dlguide_core.jobs.executors.slurm:SlurmExecutor"),
    "ray": ("Ray", "dlguide_core.jobs.executors.ray:RayExecutor"),
}


class UnknownExecutor(DlguideError):
    """An executor name that is not declared in EXECUTORS."""


@dataclass(frozen=True)
class ExecutorChoice:
    """One "Run on" option: its name, label, and whether it can be used here (and why not)."""

    name: str
    label: str
    ok: bool
    reason: str | None


class _Missing(Executor):
    """An executor whose module could not be imported: unavailable, with the reason."""

    def __init__(self, name: str, reason: str) -> None:
        self.name, self._reason = name, reason  # type: ignore[misc]

    def available(self) -> Availability:
        return Availability(False, self._reason)


def names() -> tuple[str, ...]:
    return tuple(EXECUTORS)


@cache
def get_executor(name: str) -> Executor:
    """The executor declared as `name` (one instance per process)."""
    if name not in EXECUTORS:
        raise UnknownExecutor(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    module_name, _, class_name = EXECUTORS[name][1].partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        return _Missing(name, f"the {name} executor is not built yet")
    return cls()


def choices() -> list[ExecutorChoice]:
    """Every executor with its availability (each check is quick: see Executor.available)."""
    out = []
    for name, (label, _) in EXECUTORS.items():
        ok, reason = get_executor(name).available()
        out.append(ExecutorChoice(name, label, ok, reason))
    return out
