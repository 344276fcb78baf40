"""The dataset folders under the data roots: what each is, a few samples for the browser, and loading one.

Layouts understood:
- ImageFolder: DIR/train/<class>/**/*.jpg and DIR/val/<class>/**/*.jpg (tiny-imagenet-200
  after `prepare tiny-imagenet DIR`, or any folder of 32x32 images for the guide's CIFAR-10 CNN).
- tiny-imagenet as unzipped: val/images/*.JPEG + val/val_annotations.txt (needs `prepare`).
- CIFAR-10 as torchvision downloads it: DIR/cifar-10-batches-py/ (md5-checked before unpickling).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch.utils.data import Dataset

from dlguide_core import settings
from dlguide_core.data.cifar10 import CIFAR10_CLASSES, CIFAR10_FOLDER, open_cifar10
from dlguide_core.data.class_words import readable_names
from dlguide_core.data.safe_folders import MAX_EXAMPLES, SafeImageFolder, SkippedFiles, class_folders, scan
from dlguide_core.errors import DatasetError
from dlguide_core.vision import architectures, presets
from dlguide_core.vision.images import IMAGE_SUFFIXES

VAL_NAMES = ("val", "test")


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
class DataBundle:
    train: Dataset
    val: Dataset
    class_names: tuple[str, ...]
    train_preset: presets.TrainPreset
    eval_preset: presets.EvalPreset
    display_names: tuple[str, ...] = ()  # what people read ("goldfish" for n01443537); class_names if empty
    skipped: SkippedFiles = SkippedFiles()  # unreadable files left out of train and val (safe_folders)


def _image_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()]


def _class_dirs(folder: Path) -> list[Path]:
    return class_folders(folder)  # a class folder linking outside the dataset and the data roots is left out


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
    """Datasets directly inside (or at) each data root, sorted by path. A symlink that leads out of its root
    is not followed (settings.inside: symlinks resolved before the check)."""
    found: dict[Path, DatasetInfo] = {}
    for root in roots:
        for candidate in [root, *(p for p in sorted(root.iterdir()) if p.is_dir())]:
            if not settings.inside(candidate, root):
                continue
            info = detect(candidate.resolve())
            if info is not None:
                found.setdefault(candidate.resolve(), info)
    return [found[p] for p in sorted(found)]


def unreadable_files(info: DatasetInfo) -> SkippedFiles:
    """The image files of an ImageFolder layout that training would skip as unreadable (a header scan:
    corrupt, empty, dangling symlinks, over the pixel limit), for `prepare` and the dataset browser."""
    if info.kind == "cifar10":
        return SkippedFiles()
    folders = [info.path / "train", *([v] if (v := _val_dir(info.path)) is not None else [])]
    _, bad = scan(p for folder in folders for p in sorted(_image_files(folder)))
    return SkippedFiles(len(bad), tuple(bad[:MAX_EXAMPLES]))


def sample_paths(info: DatasetInfo, per_class: int = 4, max_classes: int = 10) -> dict[str, list[Path]]:
    """A few training image files per class, for the dataset browser (ImageFolder layouts)."""
    out: dict[str, list[Path]] = {}
    for name in info.classes[:max_classes]:
        folder = info.path / "train" / name
        if folder.is_dir():  # readable files only: a corrupt one would break the browser's image grid
            out[name] = [Path(p) for p in scan(sorted(_image_files(folder))[:per_class * 4])[0][:per_class]]
    return out


def cifar_samples(info: DatasetInfo, per_class: int = 4) -> dict[str, list[Any]]:
    """The first CIFAR-10 training images of each class, as PIL images."""
    ds = open_cifar10(info.path, train=True, transform=None)
    out: dict[str, list[Any]] = {name: [] for name in CIFAR10_CLASSES}
    for index in range(len(ds)):
        image, label = ds[index]
        bucket = out[CIFAR10_CLASSES[label]]
        if len(bucket) < per_class:
            bucket.append(image)
        if all(len(v) >= per_class for v in out.values()):
            break
    return out


class _FixedClassesFolder(SafeImageFolder):
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

    def make_dataset(self, directory: Any, class_to_idx: Any, extensions: Any = None, is_valid_file: Any = None,
                     allow_empty: bool = False) -> Any:
        # Val may lack some classes (a cut of the dataset); torchvision would refuse.
        return super().make_dataset(directory, class_to_idx, extensions, is_valid_file, allow_empty=True)


def _imagefolder(info: DatasetInfo, train_preset: presets.TrainPreset, eval_preset: presets.EvalPreset) -> Any:
    val_dir = _val_dir(info.path)
    if val_dir is None:
        raise DatasetError(f"{info.path} has train/ but no val/ (or test/) folder")
    train = SafeImageFolder(str(info.path / "train"), transform=presets.train_transform(train_preset))
    val = _FixedClassesFolder(str(val_dir), tuple(train.classes), transform=presets.eval_transform(eval_preset))
    if len(val) == 0:
        raise DatasetError(f"{val_dir} holds no images")
    return train, val, tuple(train.classes)


def load_data(arch: str, data: str | Path, image_size: int | None = None) -> DataBundle:
    """The train/val datasets and presets a PyTorch recipe trains on: the architecture's own
    (architectures.Architecture.train_presets) at `image_size` (its default size when None)."""
    info = detect(data)
    if info is None:
        raise DatasetError(f"{data}: no dataset found (expected train/ + val/ class folders, or {CIFAR10_FOLDER}/)")
    if not info.ready:
        raise DatasetError(f"{data}: val/ is not organised by class yet; run "
                           f"`python -m dlguide_core prepare tiny-imagenet {data}` (or Prepare on the Train page)")
    spec = architectures.architecture(arch)
    train_preset, eval_preset = spec.train_presets(image_size or spec.default_size)
    if info.kind == "cifar10":
        train = open_cifar10(info.path, True, presets.train_transform(train_preset))
        val = open_cifar10(info.path, False, presets.eval_transform(eval_preset))
        return DataBundle(train, val, CIFAR10_CLASSES, train_preset, eval_preset)
    train, val, classes = _imagefolder(info, train_preset, eval_preset)
    return DataBundle(train, val, classes, train_preset, eval_preset, readable_names(info.path, classes),
                      train.skipped + val.skipped)
