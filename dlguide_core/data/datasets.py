"""Datasets for the training recipes: detection, preparation, download and loading.

Layouts understood:
- ImageFolder: DIR/train/<class>/**/*.jpg and DIR/val/<class>/**/*.jpg (tiny-imagenet-200
  after `prepare tiny-imagenet DIR`, or any folder of 32x32 images for cifar_net).
- tiny-imagenet as unzipped: val/images/*.JPEG + val/val_annotations.txt (needs `prepare`).
- CIFAR-10 as torchvision downloads it: DIR/cifar-10-batches-py/ (md5-checked before unpickling).
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch.utils.data import Dataset
from torchvision.datasets import CIFAR10, ImageFolder

from dlguide_core.downloads import DownloadFailed, ProgressFn, download_file
from dlguide_core.errors import DlguideError
from dlguide_core.vision import presets

TINY_IMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
TINY_IMAGENET_MD5 = "90528d7ca1a48142e341f4ef8d21d0de"
CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif")
VAL_NAMES = ("val", "test")


class DatasetError(DlguideError):
    """A dataset folder that cannot be used as it is (says what to do)."""


@dataclass(frozen=True)
class DatasetInfo:
    path: Path
    kind: str  # "imagefolder", "tiny-imagenet-unprepared" or "cifar10"
    classes: tuple[str, ...] = ()
    train_counts: dict[str, int] = field(default_factory=dict)
    val_count: int = 0

    @property
    def ready(self) -> bool:
        return self.kind != "tiny-imagenet-unprepared"

    @property
    def train_count(self) -> int:
        return sum(self.train_counts.values())


@dataclass(frozen=True)
class PrepareReport:
    """Counts from `prepare_tiny_imagenet`: moved now, already in place, classes seen."""

    moved: int
    already_in_place: int
    classes: int

    @property
    def total(self) -> int:
        return self.moved + self.already_in_place


@dataclass(frozen=True)
class DataBundle:
    train: Dataset
    val: Dataset
    class_names: tuple[str, ...]
    train_preset: presets.TrainPreset
    eval_preset: presets.EvalPreset
    display_names: tuple[str, ...] = ()  # what people read ("goldfish" for n01443537); class_names if empty


# ------------------------------------------------------------------ detection


def _image_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()]


def _class_dirs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _val_dir(root: Path) -> Path | None:
    return next((root / n for n in VAL_NAMES if (root / n).is_dir()), None)


def detect(path: str | Path) -> DatasetInfo | None:
    """What kind of dataset lives at `path`, with class counts; None when it is none we know."""
    root = Path(path)
    if (root / CIFAR10_FOLDER).is_dir():
        return DatasetInfo(root, "cifar10", CIFAR10_CLASSES, dict.fromkeys(CIFAR10_CLASSES, 5000), 10000)
    if not (root / "train").is_dir():
        return None
    train = {d.name: len(_image_files(d)) for d in _class_dirs(root / "train")}
    if not train:
        return None
    val = _val_dir(root)
    if val is not None and (val / "images").is_dir() and (val / "val_annotations.txt").is_file():
        return DatasetInfo(root, "tiny-imagenet-unprepared", tuple(train), train, len(_image_files(val)))
    val_count = len(_image_files(val)) if val is not None else 0
    return DatasetInfo(root, "imagefolder", tuple(train), train, val_count)


def find_datasets(roots: list[Path]) -> list[DatasetInfo]:
    """Datasets directly inside (or at) each data root, sorted by path."""
    found: dict[Path, DatasetInfo] = {}
    for root in roots:
        for candidate in [root, *(p for p in sorted(root.iterdir()) if p.is_dir())]:
            info = detect(candidate)
            if info is not None:
                found.setdefault(candidate.resolve(), info)
    return [found[p] for p in sorted(found)]


def sample_paths(info: DatasetInfo, per_class: int = 4, max_classes: int = 10) -> dict[str, list[Path]]:
    """A few training image files per class, for the dataset browser (ImageFolder layouts)."""
    out: dict[str, list[Path]] = {}
    for name in info.classes[:max_classes]:
        folder = info.path / "train" / name
        if folder.is_dir():
            out[name] = sorted(_image_files(folder))[:per_class]
    return out


def cifar_samples(info: DatasetInfo, per_class: int = 4) -> dict[str, list[Any]]:
    """The first CIFAR-10 training images of each class, as PIL images."""
    ds = _cifar(info.path, train=True, transform=None)
    out: dict[str, list[Any]] = {name: [] for name in CIFAR10_CLASSES}
    for index in range(len(ds)):
        image, label = ds[index]
        bucket = out[CIFAR10_CLASSES[label]]
        if len(bucket) < per_class:
            bucket.append(image)
        if all(len(v) >= per_class for v in out.values()):
            break
    return out


# ------------------------------------------------------------------ preparation


def _read_annotations(path: Path) -> dict[str, str]:
    """val_annotations.txt -> {file name: wnid}; each line is `file<TAB>wnid<TAB>box...`."""
    mapping: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
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


# ------------------------------------------------------------------ downloads


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch_archive(url: str, md5: str, dest: Path, progress: ProgressFn | None, what: str) -> Path:
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


def _safe_members(names: list[str], into: Path) -> None:
    base = into.resolve()
    for name in names:
        target = (base / name).resolve()
        if target != base and base not in target.parents:
            raise DatasetError(f"archive member {name!r} would land outside {into}; refusing to extract")


def fetch_tiny_imagenet(into: str | Path, progress: ProgressFn | None = None) -> Path:
    """Download (md5-checked) and unzip tiny-imagenet-200 into `into`; returns the dataset folder."""
    into = Path(into)
    folder = into / "tiny-imagenet-200"
    if (folder / "train").is_dir():
        return folder
    archive = _fetch_archive(TINY_IMAGENET_URL, TINY_IMAGENET_MD5, into / "tiny-imagenet-200.zip", progress,
                             "tiny-imagenet-200")
    with zipfile.ZipFile(archive) as zf:
        _safe_members(zf.namelist(), into)
        zf.extractall(into)
    return folder


def fetch_cifar10(into: str | Path, progress: ProgressFn | None = None) -> Path:
    """Download (md5-checked) and unpack CIFAR-10's python batches into `into`; returns `into`."""
    into = Path(into)
    if (into / CIFAR10_FOLDER).is_dir():
        return into
    archive = _fetch_archive(CIFAR10_URL, CIFAR10_MD5, into / "cifar-10-python.tar.gz", progress, "CIFAR-10")
    with tarfile.open(archive) as tf:
        _safe_members(tf.getnames(), into)
        tf.extractall(into, filter="data")
    return into


# ------------------------------------------------------------------ loading


class _FixedClassesFolder(ImageFolder):
    """An ImageFolder whose class -> index map is given (the train split's), not re-derived."""

    def __init__(self, root: str, classes: tuple[str, ...], **kwargs: Any) -> None:
        self._given = classes
        super().__init__(root, **kwargs)

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        present = {d.name for d in _class_dirs(Path(directory))}
        unknown = sorted(present - set(self._given))
        if unknown:
            raise DatasetError(f"{directory} has classes the train split lacks (e.g. {unknown[0]})")
        return list(self._given), {name: i for i, name in enumerate(self._given)}

    def make_dataset(self, directory, class_to_idx, extensions=None, is_valid_file=None, allow_empty=False):
        # Val may lack some classes (a cut of the dataset); torchvision would refuse.
        return super().make_dataset(directory, class_to_idx, extensions, is_valid_file, allow_empty=True)


def _cifar(root: Path, train: bool, transform: Any) -> CIFAR10:
    try:
        return CIFAR10(str(root), train=train, download=False, transform=transform)
    except RuntimeError as exc:  # torchvision's "Dataset not found or corrupted"
        raise DatasetError(f"{root}/{CIFAR10_FOLDER} is incomplete or corrupt ({exc})") from None


def _imagefolder(info: DatasetInfo, train_preset: presets.TrainPreset, eval_preset: presets.EvalPreset):
    val_dir = _val_dir(info.path)
    if val_dir is None:
        raise DatasetError(f"{info.path} has train/ but no val/ (or test/) folder")
    train = ImageFolder(str(info.path / "train"), transform=presets.train_transform(train_preset))
    val = _FixedClassesFolder(str(val_dir), tuple(train.classes), transform=presets.eval_transform(eval_preset))
    if len(val) == 0:
        raise DatasetError(f"{val_dir} holds no images")
    return train, val, tuple(train.classes)


def load_data(arch: str, data: str | Path, image_size: int = 299) -> DataBundle:
    """The train/val datasets and presets a PyTorch recipe trains on."""
    info = detect(data)
    if info is None:
        raise DatasetError(f"{data}: no dataset found (expected train/ + val/ class folders, or {CIFAR10_FOLDER}/)")
    if not info.ready:
        raise DatasetError(f"{data}: val/ is not organised by class yet; run "
                           f"`python -m dlguide_core prepare tiny-imagenet {data}` (or Prepare on the Train page)")
    if arch == "cifar_net":
        train_preset, eval_preset = presets.CIFAR_TRAIN, presets.CIFAR_EVAL
    else:
        train_preset, eval_preset = presets.inception_train_presets(image_size)
    if info.kind == "cifar10":
        train = _cifar(info.path, True, presets.train_transform(train_preset))
        val = _cifar(info.path, False, presets.eval_transform(eval_preset))
        return DataBundle(train, val, CIFAR10_CLASSES, train_preset, eval_preset)
    train, val, classes = _imagefolder(info, train_preset, eval_preset)
    return DataBundle(train, val, classes, train_preset, eval_preset, readable_names(info.path, classes))


def readable_names(root: Path, classes: tuple[str, ...]) -> tuple[str, ...]:
    """tiny-imagenet's words.txt (`wnid<TAB>synonyms, ...`): the first synonym per class id, else the id."""
    words = Path(root) / "words.txt"
    if not words.is_file():
        return classes
    names: dict[str, str] = {}
    for line in words.read_text(errors="replace").splitlines():
        wnid, _, synonyms = line.partition("\t")
        if wnid in classes and synonyms.strip():
            names[wnid] = synonyms.split(",")[0].strip()
    return tuple(names.get(c, c) for c in classes)


TOY_COLOURS = ((220, 40, 40), (40, 180, 60), (50, 70, 220), (230, 200, 40), (160, 60, 200), (40, 200, 210))


def write_toy_dataset(root: str | Path, *, classes: int = 3, per_class: int = 8, val_per_class: int = 2,
                      size: int = 32, seed: int = 0) -> Path:
    """A learnable ImageFolder (one noisy solid colour per class) for smoke runs, tests and benchmarks."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    root = Path(root)
    for split, count in (("train", per_class), ("val", val_per_class)):
        for c in range(classes):
            folder = root / split / f"class_{c}"
            folder.mkdir(parents=True, exist_ok=True)
            base = np.array(TOY_COLOURS[c % len(TOY_COLOURS)], dtype=np.int16)
            for i in range(count):
                noise = rng.integers(-40, 41, size=(size, size, 3))
                pixels = np.clip(base + noise, 0, 255).astype(np.uint8)  # (S, S, 3)
                Image.fromarray(pixels).save(folder / f"{split}_{c}_{i}.png")
    return root
