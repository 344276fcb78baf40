"""The export's temporary files in `exports/` (the weights copy handed to the export child, ~100 MB for Inception
v3, and the ONNX file being written): each carries its owner's pid and host in its name, so that what a killed
process left behind is found and removed by the next export (`remove_stale_temporaries`)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

UNOWNED_STALE_S = 3600  # a temporary of another host (or without an owner) is stale after export's own timeout
JOB_SUFFIX = ".job"  # the weights handed to the export child (~100 MB for Inception v3)
_OWNER = re.compile(r"\.pid(\d+)@([^.]+)\.")  # the owning process and its host, in a temporary's name


def owner_tag() -> str:
    import socket

    return f"pid{os.getpid()}@{socket.gethostname().split('.')[0]}"


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the export temporaries (job files, unfinished ONNX files) in `folder` whose owning process on this
    host is gone (its parent killed before its `finally`); returns them. Another host's (a shared DLGUIDE_HOME),
    or one named by an older dlguide, counts as stale only after UNOWNED_STALE_S."""
    import socket

    here = socket.gethostname().split(".")[0]
    removed = []
    for path in [*folder.glob(f"*{JOB_SUFFIX}"), *folder.glob("*.onnx.*.tmp")]:
        owner = _OWNER.search(path.name)
        try:
            if owner and owner.group(2) == here:
                stale = not _alive(int(owner.group(1)))
            else:
                stale = time.time() - path.stat().st_mtime > UNOWNED_STALE_S
            if stale:
                path.unlink()
                removed.append(path)
        except OSError:  # removed meanwhile by another process
            continue
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
