"""CIFAR-10 as torchvision downloads it (DIR/cifar-10-batches-py/): download (md5-checked) and opening a split."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

from dlguide_core.data.archives import check_members, fetch_archive
from dlguide_core.downloads import ProgressFn
from dlguide_core.errors import DatasetError
from dlguide_core.torchvision_lib import datasets

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def fetch_cifar10(into: str | Path, progress: ProgressFn | None = None) -> Path:
    """Download (md5-checked) and unpack CIFAR-10's python batches into `into`; returns `into`."""
    into = Path(into)
    if (into / CIFAR10_FOLDER).is_dir():
        return into
    archive = fetch_archive(CIFAR10_URL, CIFAR10_MD5, into / "cifar-10-python.tar.gz", progress, "CIFAR-10")
    with tarfile.open(archive) as tf:
        check_members(tf.getnames(), into)
        tf.extractall(into, filter="data")
    return into


def open_cifar10(root: Path, train: bool, transform: Any) -> datasets.CIFAR10:
    """One split of the CIFAR-10 batches under `root` (md5-checked by torchvision before unpickling)."""
    try:
        return datasets.CIFAR10(str(root), train=train, download=False, transform=transform)
    except RuntimeError as exc:  # torchvision's "Dataset not found or corrupted"
        raise DatasetError(f"{root}/{CIFAR10_FOLDER} is incomplete or corrupt ({exc})") from None
