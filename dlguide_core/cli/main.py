"""`python -m dlguide_core ...`: the parser and the exit codes of every subcommand.

Each subcommand lives in its own module here with `register(subparsers)`, which
adds its parser and sets `func(args) -> exit code`.

Exit codes (a contract other tools rely on, defined once in `cli.common`): 0 success,
1 some work failed, 2 usage errors (bad arguments, unreadable checkpoint, path outside the
data roots, a path the filesystem refuses, a job store that cannot be used), 3 weights unavailable offline;
141 when the reader of stdout went away (`... | head`), quietly.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
from pathlib import Path

from dlguide_core import __version__, threads
from dlguide_core.cli.common import EXIT_FAILED, EXIT_USAGE, EXIT_WEIGHTS
from dlguide_core.errors import (
    CheckpointError,
    DlguideError,
    PathNotAllowed,
    StoreError,
    UsageError,
    WeightsUnavailable,
)
from dlguide_core.jobs import store_url

EXIT_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool whose reader closed the pipe
USAGE_ERRNOS = {errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.EACCES}
COMMAND_MODULES = ("devices", "classify", "train", "jobs", "prepare", "export", "bench", "evaluate", "store",
                   "teach")


def build_parser() -> argparse.ArgumentParser:
    # the usage line names the command as the user typed it: `dlguide ...` (installed), else the module
    prog = "dlguide" if Path(sys.argv[0]).name == "dlguide" else "python -m dlguide_core"
    parser = argparse.ArgumentParser(prog=prog,
                                     description="Inception v3 case study of the ROCm Deep Learning Guide, headless.")
    parser.add_argument("--version", action="version", version=f"dlguide {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"dlguide_core.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # exits 2 on usage errors
    threads.declare(process_kind(args))  # before any command imports torch (OpenMP reads its environment once)
    store_url.absolute_environment()  # a relative DLGUIDE_STORE_URL means this directory, for every job it starts
    try:
        return int(args.func(args))
    except WeightsUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_WEIGHTS
    except (CheckpointError, PathNotAllowed, StoreError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except DlguideError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `jobs export ID --csv | head`: the reader left; stop quietly, as Unix tools do
        _silence_stdout()
        return EXIT_PIPE
    except OSError as exc:  # a path the filesystem refuses (name too long, not a folder...): one line
        name = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {name}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE if exc.errno in USAGE_ERRNOS else EXIT_FAILED


def process_kind(args: argparse.Namespace) -> threads.ProcessKind:
    """This process's kind (dlguide_core.threads): a job run here in the foreground is a job process."""
    foreground = not getattr(args, "detach", True) and (
        (args.command == "train" and getattr(args, "executor", "local") == "local")
        or (args.command == "jobs" and getattr(args, "action", "") == "resume"))
    return threads.command_kind(args.command, foreground_job=foreground)


def _silence_stdout() -> None:
    # Python flushes stdout once more at exit and would print a second BrokenPipeError: point it at devnull.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (captured in tests): nothing to flush
        pass
