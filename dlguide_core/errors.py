"""User-facing errors: one line each, safe to show in the app or print from the CLI; and the one way a foreign
exception (a library's, a subprocess's) is cut to the one line quoted inside them."""

import re

SUMMARY_CHARS = 240  # the most a quoted first line keeps
_CPP_LOCATION = re.compile(r"^\S+\.[ch]pp:\d+: \w+: ")  # "program.cpp:123: compile: " before a C++ message


def first_line(text: str) -> str:
    """The first line of `text` ("" when it is blank), without a C++ source location, cut to SUMMARY_CHARS."""
    lines = text.strip().splitlines()
    return _CPP_LOCATION.sub("", lines[0].strip())[:SUMMARY_CHARS] if lines else ""


def error_summary(exc: BaseException) -> str:
    """An exception in one line: its message's first line, or its type's name when it has no message."""
    return first_line(str(exc)) or type(exc).__name__


class DlguideError(Exception):
    """An error whose message is meant for the user (no traceback needed)."""


class ImageError(DlguideError):
    """An upload or file that is not a usable image."""


class WeightsUnavailable(DlguideError):
    """Requested weights are not on disk and cannot be downloaded (offline)."""


class CheckpointError(DlguideError):
    """A checkpoint file that is missing, foreign or corrupt."""


class PathNotAllowed(DlguideError):
    """A path outside the configured data roots."""


class DatasetError(DlguideError):
    """A dataset folder or file that is missing, in the wrong layout, or unreadable."""
class DistributedError(DlguideError):
    """A multi-process setting that cannot work (too few GPUs, bad endpoint...)."""


class StoreError(DlguideError):
    """The job store cannot be used as asked: unreachable, read-only, full, corrupt, or at another schema version."""


class UsageError(DlguideError):
    """A request that cannot work as given (a bad address, a setting out of range): refused before any work starts,
    exit 2 like argparse's own usage errors."""
