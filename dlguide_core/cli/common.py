"""What the subcommands share: exit codes, argument types and a download progress line.

Exit codes (a contract other tools rely on): 0 success, 1 some work failed,
2 usage errors (bad arguments, unreadable checkpoint, path outside the data roots),
3 weights unavailable offline.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from dlguide_core import settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WEIGHTS = 0, 1, 2, 3


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
