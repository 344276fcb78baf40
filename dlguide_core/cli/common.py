"""What the subcommands share: exit codes, argument types and a download progress line.

Exit codes (a contract other tools rely on): 0 success, 1 some work failed,
2 usage errors (bad arguments, unreadable checkpoint, path outside the data roots),
3 weights unavailable offline.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from dlguide_core import settings
from dlguide_core.training.fields import spec_of

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WEIGHTS = 0, 1, 2, 3


def terminal_safe(text: str) -> str:
    """`text` with every control character but newline and tab shown as '?': a name from a dataset folder, a job
    or an error cannot move the cursor, recolour or retitle the reader's terminal (ESC sequences)."""
    return "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text)


class TerminalSafe:
    """A stdout stand-in that writes through `terminal_safe` (for the text of `jobs show` and `jobs list`)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(terminal_safe(text))

    def flush(self) -> None:
        self.out.flush()


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse turns the error into exit code 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def dataset_path(text: str) -> Path:
    """A dataset folder named on the command line (`train --data`, `prepare DIR`), resolved. When the
    operator set DLGUIDE_DATA_ROOTS, it must lie inside one of those folders, symlinks resolved
    (PathNotAllowed: exit 2); unset, the CLI takes any folder, as its user's own shell would.
    Checkpoints (`--weights PATH`), images to classify and output files are the user's own files: not checked."""
    if os.environ.get("DLGUIDE_DATA_ROOTS", "").strip():
        return settings.resolve_in_roots(text)
    return Path(text).expanduser().resolve()


def download_progress(what: str) -> Callable[[int, int], None] | None:
    """A `(done, total)` callback that redraws one stderr line, or None when stderr is not a terminal
    (a log file or a pipe would fill with carriage-return lines)."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        pct = f"{100 * done / total:5.1f}%" if total else f"{done / 2**20:.1f} MiB"
        print(f"\rdownloading {what} {pct}", end="", file=sys.stderr, flush=True)

    return show


_FLAG_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "int | None": int, "float": float}


def add_field_flags(parser: Any, config_cls: type, names: Iterable[str], *, field_default: bool = False,
                    **argparse_options: Any) -> None:
    """`--name-with-dashes` for each config field in `names`, generated from the field's declaration
    (training/fields.py): metavar, help, choices, its type (a bool field is a switch). Left out, a flag is None,
    so the recipe keeps its own default, unless `field_default` (the field's default). `argparse_options` are
    argparse's own (required, a parse-time type) for every one of them."""
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    for name in names:
        spec = spec_of(config_cls, name)
        flag = spec.flag if spec else None
        if flag is None:
            raise TypeError(f"{config_cls.__name__}.{name} declares no CLI flag")
        annotation = str(fields[name].type)  # the annotation's text (`from __future__ import annotations`)
        switch = annotation == "bool"
        described = {"help": flag.help, "metavar": flag.metavar, "choices": flag.choices,
                     "type": None if switch else _FLAG_TYPES.get(annotation)}
        options: dict[str, Any] = {k: v for k, v in described.items() if v is not None}
        options["default"] = fields[name].default if field_default else None  # a switch not given: None too
        if switch:
            options["action"] = "store_true"
        parser.add_argument(f"--{name.replace('_', '-')}", **options | argparse_options)


def field_values(config_cls: type, names: Iterable[str], args: argparse.Namespace) -> dict[str, Any]:
    """The flags' values as config values (a flag word mapped through its declaration's `values`; None: not given)."""
    values = {}
    for name in names:
        value, spec = getattr(args, name), spec_of(config_cls, name)
        mapping = spec.flag.values if spec and spec.flag else None
        values[name] = mapping[value] if mapping and value is not None else value
    return values
