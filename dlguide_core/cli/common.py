"""What the subcommands share: exit codes, argument types and a download progress line.

Exit codes (a contract other tools rely on): 0 success, 1 some work failed,
2 usage errors (bad arguments, unreadable checkpoint, path outside the data roots),
3 weights unavailable offline.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

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


def download_progress(what: str) -> Callable[[int, int], None] | None:
    """A `(done, total)` callback that redraws one stderr line, or None when stderr is not a terminal
    (a log file or a pipe would fill with carriage-return lines)."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        pct = f"{100 * done / total:5.1f}%" if total else f"{done / 2**20:.1f} MiB"
        print(f"\rdownloading {what} {pct}", end="", file=sys.stderr, flush=True)

    return show
