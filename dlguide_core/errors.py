"""User-facing errors: one line each, safe to show in the app or print from the CLI."""


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
