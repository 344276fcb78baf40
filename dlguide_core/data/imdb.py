"""The IMDB reviews (aclImdb) for the TensorFlow text case study: a local tree, or the download.

A local `aclImdb/` tree holds train|test × pos|neg, one review per .txt file; the `unsup` folder
is ignored, as the guide deletes it. Without one, the archive is downloaded and unpacked. Offline
with no local copy, a one-line DatasetError says what to fetch and where to put it.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from dlguide_core import settings
from dlguide_core.data.local_copies import candidate_folders
from dlguide_core.downloads import DownloadFailed, ProgressFn, download_file
from dlguide_core.errors import DatasetError

IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
IMDB_FOLDER = "aclImdb"
IMDB_CLASSES = ("neg", "pos")  # label 0 = negative, 1 = positive (alphabetical, as the guide's loader infers)


def find_imdb(folder: str | Path) -> Path | None:
    """`folder` itself when it is an aclImdb tree, or its aclImdb/ child; else None."""
    folder = Path(folder)
    for candidate in (folder, folder / IMDB_FOLDER):
        if all((candidate / split / label).is_dir() for split in ("train", "test") for label in IMDB_CLASSES):
            return candidate
    return None


def find_imdb_trees(roots: list[Path]) -> list[Path]:
    """aclImdb trees under the data roots."""
    return [p for p in candidate_folders(roots) if p.name == IMDB_FOLDER and find_imdb(p) == p]


def fetch_imdb(into: str | Path | None = None, progress: ProgressFn | None = None) -> Path:
    """Download and unpack aclImdb_v1.tar.gz into `into` (default DLGUIDE_HOME/data); returns aclImdb/."""
    into = Path(into) if into else settings.home() / "data"
    archive = into / "aclImdb_v1.tar.gz"
    try:
        if not archive.is_file():
            download_file(IMDB_URL, archive, progress=progress, timeout=60.0)
    except DownloadFailed as exc:
        raise DatasetError(f"the IMDB reviews could not be downloaded ({exc}). Download {IMDB_URL} elsewhere and "
                           f"unpack it so that {into / IMDB_FOLDER}/train/pos exists") from None
    with tarfile.open(archive) as tar:
        # filter="data" refuses absolute paths, links out of the tree and device files
        members = [m for m in tar.getmembers() if "/unsup/" not in m.name + "/"]
        tar.extractall(into, members=members, filter="data")
    archive.unlink(missing_ok=True)
    found = find_imdb(into)
    if found is None:
        raise DatasetError(f"{archive.name} did not unpack to {into / IMDB_FOLDER}/(train|test)/(pos|neg)")
    return found


def locate_imdb(data: str | Path = "", progress: ProgressFn | None = None) -> Path:
    """The aclImdb tree in `data`, or (no `data`) the cached or freshly downloaded one."""
    if data:
        found = find_imdb(data)
        if found is None:
            raise DatasetError(f"{data}: expected an {IMDB_FOLDER}/ tree with train/ and test/, each holding "
                               f"pos/ and neg/ review files (unpack {IMDB_URL})")
        return found
    cached = find_imdb(settings.home() / "data")
    return cached if cached is not None else fetch_imdb(progress=progress)
