"""Dataset archives: downloaded once and md5-checked, and refused when a member would land outside the target."""

from __future__ import annotations

import hashlib
from pathlib import Path

from dlguide_core.downloads import DownloadFailed, ProgressFn, download_file
from dlguide_core.errors import DatasetError


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_archive(url: str, md5: str, dest: Path, progress: ProgressFn | None, what: str) -> Path:
    """`dest`, downloaded from `url` unless already there with this md5; DatasetError names `what` and the fix."""
    if dest.is_file() and _md5(dest) == md5:
        return dest
    try:
        download_file(url, dest, progress=progress)
    except DownloadFailed as exc:
        raise DatasetError(f"{what} could not be downloaded ({exc}). Download {url} on a machine with "
                           f"internet and copy it to {dest}") from None
    if _md5(dest) != md5:
        dest.unlink(missing_ok=True)
        raise DatasetError(f"{what}: checksum mismatch for {url} (expected md5 {md5}); the file was removed")
    return dest


def check_members(names: list[str], into: Path) -> None:
    """Refuse (DatasetError) an archive whose member names would extract outside `into`."""
    base = into.resolve()
    for name in names:
        target = (base / name).resolve()
        if target != base and base not in target.parents:
            raise DatasetError(f"archive member {name!r} would land outside {into}; refusing to extract")
