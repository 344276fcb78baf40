"""Sample images: bundled CC0 photos, plus the guide's dog.jpg fetched on demand."""

from __future__ import annotations

from pathlib import Path

from dlguide_core import settings
from dlguide_core.downloads import ProgressFn, download_file

BUNDLED_DIR = Path(__file__).resolve().parents[1] / "samples"  # dlguide_core/samples/
GUIDE_DOG_URL = "https://github.com/pytorch/hub/raw/master/images/dog.jpg"
GUIDE_DOG_NAME = "dog.jpg (the guide's sample, downloaded)"


def bundled_samples() -> dict[str, Path]:
    """Display name -> path of the images shipped with the package (see samples/SOURCES.md)."""
    return {p.stem.replace("_", " "): p for p in sorted(BUNDLED_DIR.glob("*.jpg"))}


def guide_dog_path() -> Path:
    return settings.home() / "samples" / "dog.jpg"


def fetch_guide_dog(progress: ProgressFn | None = None) -> Path:
    """The guide's dog.jpg, cached under DLGUIDE_HOME; raises DownloadFailed offline."""
    path = guide_dog_path()
    return path if path.is_file() else download_file(GUIDE_DOG_URL, path, progress=progress)
