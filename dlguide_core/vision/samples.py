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


def sample_titles() -> dict[str, str]:
    """Display name -> a person's title for each bundled image, from samples/SOURCES.md ("Chelsea the cat", "A
    coffee cup"): what a visitor reads under an example, never the file's internal name."""
    titles = {}
    for line in (BUNDLED_DIR / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        name, sep, rest = line.removeprefix("- `").partition(".jpg`: ")
        if sep and line.startswith("- `"):
            title = rest.split(", CC0")[0].strip().strip('"')
            titles[name.replace("_", " ")] = title[:1].upper() + title[1:]
    return titles


def sample_title(name: str) -> str:
    """The title of bundled sample `name` (its display name when SOURCES.md names no title)."""
    return sample_titles().get(name, name)


def guide_dog_path() -> Path:
    return settings.home() / "samples" / "dog.jpg"


def fetch_guide_dog(progress: ProgressFn | None = None) -> Path:
    """The guide's dog.jpg, cached under DLGUIDE_HOME; raises DownloadFailed offline."""
    path = guide_dog_path()
    return path if path.is_file() else download_file(GUIDE_DOG_URL, path, progress=progress)
