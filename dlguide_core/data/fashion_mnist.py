"""Fashion-MNIST for the TensorFlow case study: a local folder of the four idx files, or keras.datasets.

A local folder holds the four standard `*-idx?-ubyte.gz` files (parsed here with numpy + gzip);
without one, `keras.datasets` downloads them (online). Offline with no local copy, a one-line
DatasetError says what to fetch and where to put it. TensorFlow is imported only for the download.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlguide_core import settings
from dlguide_core.data.local_copies import candidate_folders
from dlguide_core.downloads import offline
from dlguide_core.errors import DatasetError

FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                   "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
FASHION_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
FASHION_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"  # where keras.datasets fetches them

# idx type codes (the third magic byte) -> numpy dtype, big-endian as the format says
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


@dataclass(frozen=True)
class ArrayData:
    """Fashion-MNIST as arrays: images (N, 28, 28) uint8, labels (N,) uint8."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    source: str


def read_idx(path: str | Path) -> np.ndarray:
    """One gzipped idx file (the MNIST container format) -> an array of its declared shape."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") as fh:
            data = fh.read()
    except (OSError, EOFError) as exc:
        raise DatasetError(f"{path.name}: not a readable .gz file ({exc})") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise DatasetError(f"{path.name}: not an idx file (bad magic number)")
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise DatasetError(f"{path.name}: header says {shape} but the file holds {len(data) - header} bytes of data")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def find_fashion_files(folder: str | Path) -> dict[str, Path] | None:
    """The four idx files in `folder` or one level below it (e.g. DIR/fashion-mnist/), else None."""
    folder = Path(folder)
    candidates = [folder, *sorted(p for p in folder.iterdir() if p.is_dir())] if folder.is_dir() else []
    for candidate in candidates:
        found = {key: candidate / name for key, name in FASHION_FILES.items()}
        if all(p.is_file() for p in found.values()):
            return found
    return None


def load_fashion_idx(folder: str | Path) -> ArrayData:
    files = find_fashion_files(folder)
    if files is None:
        raise DatasetError(f"{folder}: expected the four Fashion-MNIST files {', '.join(FASHION_FILES.values())}")
    arrays = {key: read_idx(path) for key, path in files.items()}
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise DatasetError(f"{folder}: {split} images {images.shape} do not match labels {labels.shape}")
        if labels.size and int(labels.max()) >= len(FASHION_CLASSES):
            raise DatasetError(f"{folder}: {split} labels go up to {int(labels.max())}; Fashion-MNIST has 10 classes")
    return ArrayData(**arrays, source=str(files["train_images"].parent))


def load_fashion_mnist(data: str | Path = "") -> ArrayData:
    """A local idx folder when `data` is given; otherwise keras.datasets (downloads once, online)."""
    if data:
        return load_fashion_idx(data)
    roots = settings.data_roots()  # a folder the Train page lists: inside a configured root, not beside them
    example = (roots[0] if roots else settings.home() / "data") / "fashion-mnist"
    hint = (f"download the four files {', '.join(FASHION_FILES.values())} from {FASHION_URL} into a folder "
            f"under the data roots (e.g. {example}) and pick it")
    if offline():
        raise DatasetError(f"Fashion-MNIST is not available offline: {hint}")
    from dlguide_core.tf.runtime import import_tensorflow

    import_tensorflow()  # TensorFlow with its process settings, before Keras loads it
    from keras import datasets

    try:
        (x_train, y_train), (x_test, y_test) = datasets.fashion_mnist.load_data()
    except Exception as exc:  # noqa: BLE001 - keras raises bare Exception subclasses for network failures
        raise DatasetError(f"Fashion-MNIST could not be downloaded ({str(exc)[:120]}); {hint}") from None
    return ArrayData(x_train, y_train, x_test, y_test, source="keras.datasets.fashion_mnist")


def find_fashion_folders(roots: list[Path]) -> list[Path]:
    """Folders under the data roots that hold the four Fashion-MNIST idx files."""
    return [p for p in candidate_folders(roots) if all((p / name).is_file() for name in FASHION_FILES.values())]
