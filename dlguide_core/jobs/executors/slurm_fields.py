"""The Slurm fields a person types (`--partition`, `--account`, `--time`, and the Train page's same fields),
declared once with what Slurm accepts, and checked at submit, before any job or batch script exists.

Each value ends up on an `#SBATCH` line of the job's batch script: a newline there would start a line of its own
(a second directive, or a command). sbatch 22.05 refused every variant tried, but dlguide does not rely on that:
names are Slurm's own characters (letters, digits, `_ . + -`), the time one of Slurm's time formats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from dlguide_core.errors import UsageError
from dlguide_core.training.fields import ConfigError

# Slurm's time formats (sbatch --time): M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; or "INFINITE"/"UNLIMITED". ASCII digits
# only (`\d` also matches `١`, which Python's int() reads and Slurm does not), and bounded: at most 9999 days, or
# 9,999,999 minutes (19 years), so no 20-digit number reaches int() or sbatch.
_TIME = re.compile(r"(?:[0-9]{1,4}-[0-9]{1,2}(?::[0-9]{1,2}){0,2}|[0-9]{1,7}(?::[0-9]{1,2}){0,2})")
_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")


class SlurmFieldError(ConfigError, UsageError):
    """A Slurm field that Slurm would not take (or that could break the batch script): exit 2, one line."""


@dataclass(frozen=True)
class SlurmField:
    flag: str
    example: str
    pattern: re.Pattern[str]
    rule: str  # what a valid value looks like, in words


FIELDS = {
    "partition": SlurmField("--partition", "gpu", _NAME, "letters, digits and _ . + - (at most 64)"),
    "account": SlurmField("--account", "proj123", _NAME, "letters, digits and _ . + - (at most 64)"),
    "time": SlurmField("--time", "01:30:00", _TIME, "a Slurm time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                       "D-HH:MM:SS in ASCII digits, above zero, at most 9999 days"),
}


def check_field(name: str, value: str | None) -> None:
    """SlurmFieldError (one line, the value shown without its control characters) unless `value` is valid."""
    if value is None:
        return
    field = FIELDS[name]
    valid = field.pattern.fullmatch(value) is not None
    if valid and name == "time":
        valid = any(int(n) for n in re.findall(r"[0-9]+", value))  # 0, 00:00, 0-0 ask for no time at all
    if not valid:
        shown = "".join(c if c.isprintable() else "?" for c in value)[:80]
        raise SlurmFieldError(f"{field.flag} must be {field.rule} (like {field.example}), not {shown!r}")


class TypedFields(Protocol):
    """What check_options reads: jobs.executors.slurm.SlurmOptions (named by shape, so this module needs no import
    of the executor that imports it)."""

    @property
    def partition(self) -> str | None: ...
    @property
    def account(self) -> str | None: ...
    @property
    def time(self) -> str | None: ...


def check_options(options: TypedFields) -> None:
    """Every declared field of a SlurmOptions (already resolved from flags and DLGUIDE_SLURM_*)."""
    for name in FIELDS:
        check_field(name, getattr(options, name, None))
