"""Image folders that survive bad files: every file decoded by the upload path's safe function
(`vision.images.load_image`: pixel limit, regular files only), unreadable ones skipped and counted.

A dataset scan (`scan`) checks each file's header before training (corrupt, dangling symlink, not an
image, decompression bomb, empty) and drops what fails; `SkippedFiles` records how many and which. A
file whose header is fine but whose pixels are not (truncated) is found only when decoded: its sample is
replaced by the next readable one and one line goes to stderr (the job log). Too many bad files is a
broken dataset, not noise: past MAX_SKIPPED_FRACTION of a split (and more than TOLERATED_FILES, so a toy
split survives its one bad file), or with nothing readable left, loading fails in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlguide_core import settings
from dlguide_core.errors import DatasetError, ImageError
from dlguide_core.torchvision_lib import datasets
from dlguide_core.vision.images import IMAGE_SUFFIXES, image_file_problem, load_image

MAX_SKIPPED_FRACTION = 0.01  # 1% of a split: more is a broken copy of the dataset, and training stops
TOLERATED_FILES = 3  # ... unless it is only this many (1% of a 100-image split would be one file)
MAX_EXAMPLES = 5


@dataclass(frozen=True)
class SkippedFiles:
    """Unreadable files left out of a dataset: how many, and up to MAX_EXAMPLES of them with the reason."""

    count: int = 0
    examples: tuple[str, ...] = ()

    def __add__(self, other: SkippedFiles) -> SkippedFiles:
        return SkippedFiles(self.count + other.count, (self.examples + other.examples)[:MAX_EXAMPLES])

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "examples": list(self.examples)}


def scan(paths: Iterable[str | Path]) -> tuple[list[str], list[str]]:
    """(readable paths, one line per unreadable file), in the order given."""
    good: list[str] = []
    bad: list[str] = []
    for path in paths:
        problem = image_file_problem(path)
        (bad if problem else good).append(problem or str(path))
    return good, bad


def check_fraction(split: str, total: int, bad: list[str]) -> SkippedFiles:
    """SkippedFiles for a split, or DatasetError when more than MAX_SKIPPED_FRACTION of it is unreadable."""
    if total and (len(bad) == total or len(bad) > max(MAX_SKIPPED_FRACTION * total, TOLERATED_FILES)):
        raise DatasetError(f"{len(bad)} of {total} files in {split} are unreadable (more than "
                           f"{MAX_SKIPPED_FRACTION:.0%}; e.g. {bad[0]}): fix or remove them")
    return SkippedFiles(len(bad), tuple(bad[:MAX_EXAMPLES]))


def class_folders(directory: Path, say: Any = None) -> list[Path]:
    """The class folders of a split, sorted: hidden ones left out, and so is a folder that links outside both the
    split and the data roots (`settings.inside`; `say(line)` names each one left out)."""
    split = directory.resolve()
    allowed = [split, *settings.data_roots()]
    found = []
    for entry in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if any(settings.inside(entry, base) for base in allowed):
            found.append(entry)
        elif say is not None:
            say(f"skipped class folder {entry.name}: it links outside the dataset and the data roots")
    return found


def _warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def safe_loader(path: str) -> Any:
    """ImageFolder's loader, the uploads' way: an RGB PIL image, or ImageError."""
    return load_image(path)


class SafeImageFolder(datasets.ImageFolder):
    """An ImageFolder that decodes safely and leaves unreadable files out (see the module's docstring)."""

    samples: list[tuple[str, int]]  # ImageFolder's (path, class index) pairs

    def __init__(self, root: str, **kwargs: Any) -> None:
        super().__init__(root, loader=safe_loader, **kwargs)
        self._drop_unreadable()

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        """torchvision's, without class folders that link outside the dataset and the data roots."""
        classes = [folder.name for folder in class_folders(Path(directory), say=_warn)]
        if not classes:
            raise DatasetError(f"{directory} holds no class folders")
        return classes, {name: i for i, name in enumerate(classes)}

    def make_dataset(self, directory: Any, class_to_idx: Any, extensions: Any = None, is_valid_file: Any = None,
                     allow_empty: bool = False) -> Any:
        if extensions is not None:  # torchvision's IMG_EXTENSIONS lists .tif, .ppm...: files the decoders refuse
            extensions = IMAGE_SUFFIXES
        try:
            return super().make_dataset(directory, class_to_idx, extensions, is_valid_file, allow_empty=allow_empty)
        except FileNotFoundError as exc:  # torchvision's "Found no valid file for the classes ...": one line
            raise DatasetError(f"{directory}: {str(exc).splitlines()[0]}") from None

    def _drop_unreadable(self) -> None:
        good, bad = scan(path for path, _ in self.samples)
        self.skipped = check_fraction(self.root, len(self.samples), bad)
        if bad:
            keep = set(good)
            self.samples = [s for s in self.samples if s[0] in keep]
            self.imgs, self.targets = self.samples, [label for _, label in self.samples]

    def __getitem__(self, index: int) -> tuple[Any, int]:
        for offset in range(len(self.samples)):
            try:
                return super().__getitem__((index + offset) % len(self.samples))
            except ImageError as exc:  # truncated pixels behind a good header: the next sample stands in
                print(f"skipped unreadable file {exc}", file=sys.stderr, flush=True)
        raise DatasetError(f"{self.root}: no readable image left")
