"""Fetch files from the internet atomically, with progress and checksum.

Used for the ImageNet weights, the guide's sample image and datasets. Offline,
every failure becomes a DlguideError subclass that says what to fetch and where to put it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from dlguide_core.errors import DlguideError

ProgressFn = Callable[[int, int], object]  # (bytes_done, bytes_total or 0); its return value is ignored
CHUNK = 1 << 20


class DownloadFailed(DlguideError):
    """The network or the server refused; carries what to do instead."""


def offline() -> bool:
    return os.environ.get("DLGUIDE_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def download_file(
    url: str,
    dest: Path,
    *,
    progress: ProgressFn | None = None,
    sha256_prefix: str | None = None,
    timeout: float = 30.0,
) -> Path:
    """Download `url` to `dest` through a temp file in the same folder, then rename."""
    if offline():
        raise DownloadFailed(f"offline mode (DLGUIDE_OFFLINE) is set; cannot fetch {url}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        digest = _stream(url, fd, progress, timeout)
        if sha256_prefix and not digest.startswith(sha256_prefix):
            raise DownloadFailed(f"checksum mismatch for {url}: got {digest[:16]}, expected {sha256_prefix}")
        os.replace(tmp, dest)
        return dest
    finally:
        tmp.unlink(missing_ok=True)


def _stream(url: str, fd: int, progress: ProgressFn | None, timeout: float) -> str:
    sha = hashlib.sha256()
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "dlguide"})
        with urllib.request.urlopen(request, timeout=timeout) as response, os.fdopen(fd, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            while chunk := response.read(CHUNK):
                out.write(chunk)
                sha.update(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DownloadFailed(f"cannot download {url}: {reason}") from None
    return sha.hexdigest()

