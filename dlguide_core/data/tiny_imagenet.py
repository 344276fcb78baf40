"""tiny-imagenet-200: download (md5-checked) and the guide's val re-organisation into class folders.

As unzipped, val/ holds images/*.JPEG and val_annotations.txt; `prepare_tiny_imagenet` moves each
image to val/<wnid>/images/ so the folder reads as an ImageFolder (`image_folders.load_data`).
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from dlguide_core import settings
from dlguide_core.data.archives import check_members, fetch_archive
from dlguide_core.downloads import ProgressFn
from dlguide_core.errors import DatasetError

TINY_IMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
TINY_IMAGENET_MD5 = "90528d7ca1a48142e341f4ef8d21d0de"


@dataclass(frozen=True)
class PrepareReport:
    """Counts from `prepare_tiny_imagenet`: moved now, already in place, classes seen."""

    moved: int
    already_in_place: int
    classes: int

    @property
    def total(self) -> int:
        return self.moved + self.already_in_place


def _read_annotations(path: Path) -> dict[str, str]:
    """val_annotations.txt -> {file name: wnid}; each line is `file<TAB>wnid<TAB>box...`."""
    mapping: dict[str, str] = {}
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start}); is it the tiny-imagenet file? "
                           "Nothing was moved") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise DatasetError(f"{path}: line {number} is not `file<TAB>wnid...`; nothing was moved")
        for value, what in ((parts[0], "file"), (parts[1], "class id")):
            # Both columns become path parts of a move: a name only, never "..", "/x" or "a/b".
            if Path(value).name != value or value in (".", ".."):
                raise DatasetError(f"{path}: line {number} names a path ({value!r}), not a {what}; "
                                   "nothing was moved")
        mapping[parts[0]] = parts[1]
    return mapping


def _plan_moves(val: Path, annotations: dict[str, str]) -> tuple[list[tuple[Path, Path]], int]:
    """Check the whole layout first; return (moves still to do, files already in place)."""
    pending_dir = val / "images"
    pending = {p.name for p in pending_dir.iterdir() if p.is_file()} if pending_dir.is_dir() else set()
    unannotated = sorted(pending - set(annotations))
    if unannotated:
        raise DatasetError(f"{len(unannotated)} file(s) in {pending_dir} have no annotation (e.g. {unannotated[0]});"
                           " the layout is inconsistent and nothing was moved")
    moves, in_place, missing = [], 0, []
    for name, wnid in sorted(annotations.items()):
        dest = val / wnid / "images" / name
        if name in pending and dest.exists():
            raise DatasetError(f"{name} is both in {pending_dir} and in {dest.parent}; nothing was moved")
        if name in pending:
            moves.append((pending_dir / name, dest))
        elif dest.is_file():
            in_place += 1
        else:
            missing.append(name)
    if missing:
        raise DatasetError(f"{len(missing)} annotated file(s) are missing (e.g. {missing[0]}); "
                           "the layout is inconsistent and nothing was moved")
    root = val.parent
    outside = next((p for move in moves for p in (move[0], move[1].parent) if not settings.inside(p, root)), None)
    if outside is not None:  # a symlinked val/<wnid> or val/images: never move a file out of the dataset
        raise DatasetError(f"{outside} leads outside {root.resolve()} (a symlink?); nothing was moved")
    return moves, in_place


def prepare_tiny_imagenet(root: str | Path) -> PrepareReport:
    """The guide's val re-organisation (val/images -> val/<wnid>/images), checked first, resumable.

    Every file is checked before any is moved; each move is an atomic rename, so an
    interrupted run is finished by running again, and a finished one is a no-op.
    """
    root = Path(root)
    val = root / "val"
    annotations_file = val / "val_annotations.txt"
    if not (root / "train").is_dir() or not val.is_dir():
        raise DatasetError(f"{root} does not look like tiny-imagenet-200 (expected train/ and val/)")
    if not annotations_file.is_file():
        raise DatasetError(f"{annotations_file} is missing; cannot tell which class each val image is")
    annotations = _read_annotations(annotations_file)
    moves, in_place = _plan_moves(val, annotations)
    for src, dest in moves:
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)
    pending_dir = val / "images"
    if pending_dir.is_dir() and not any(pending_dir.iterdir()):
        pending_dir.rmdir()  # an empty val/images would otherwise read as a class called "images"
    return PrepareReport(moved=len(moves), already_in_place=in_place, classes=len(set(annotations.values())))


def fetch_tiny_imagenet(into: str | Path, progress: ProgressFn | None = None) -> Path:
    """Download (md5-checked) and unzip tiny-imagenet-200 into `into`; returns the dataset folder."""
    into = Path(into)
    folder = into / "tiny-imagenet-200"
    if (folder / "train").is_dir():
        return folder
    archive = fetch_archive(TINY_IMAGENET_URL, TINY_IMAGENET_MD5, into / "tiny-imagenet-200.zip", progress,
                            "tiny-imagenet-200")
    with zipfile.ZipFile(archive) as zf:
        check_members(zf.namelist(), into)
        zf.extractall(into)
    return folder
