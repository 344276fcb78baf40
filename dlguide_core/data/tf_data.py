"""Data for the TensorFlow case studies: Fashion-MNIST and the IMDB reviews (aclImdb).

Fashion-MNIST comes from a local folder holding the four standard `*-idx?-ubyte.gz`
files (parsed here with numpy + gzip) or, online, from `keras.datasets`. IMDB comes
from a local `aclImdb/` tree (train|test × pos|neg, one review per .txt file; the
`unsup` folder is ignored, as the guide deletes it) or is downloaded and unpacked.
Offline with no local copy, a one-line DatasetError says what to fetch and where to put it.

Only numpy here: TensorFlow is imported by the callers, inside functions.
"""

from __future__ import annotations

import gzip
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlguide_core import settings
from dlguide_core.downloads import DownloadFailed, ProgressFn, download_file, offline
from dlguide_core.errors import DlguideError

FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                   "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
FASHION_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
FASHION_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"  # where keras.datasets fetches them
IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
IMDB_FOLDER = "aclImdb"
IMDB_CLASSES = ("neg", "pos")  # label 0 = negative, 1 = positive (alphabetical, as the guide's loader infers)

# idx type codes (the third magic byte) -> numpy dtype, big-endian as the format says
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class DatasetError(DlguideError):
    """A TensorFlow recipe's dataset that is missing or malformed (says what to do)."""


@dataclass(frozen=True)
class ArrayData:
    """Fashion-MNIST as arrays: images (N, 28, 28) uint8, labels (N,) uint8."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    source: str


# ------------------------------------------------------------------ Fashion-MNIST


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
    hint = (f"download the four files {', '.join(FASHION_FILES.values())} from {FASHION_URL} into a folder "
            f"under the data roots (e.g. {settings.home() / 'data' / 'fashion-mnist'}) and pick it")
    if offline():
        raise DatasetError(f"Fashion-MNIST is not available offline: {hint}")
    from dlguide_core.training.tf_recipes import import_tensorflow

    import_tensorflow()  # TensorFlow with its process settings, before Keras loads it
    from keras import datasets

    try:
        (x_train, y_train), (x_test, y_test) = datasets.fashion_mnist.load_data()
    except Exception as exc:  # noqa: BLE001 - keras raises bare Exception subclasses for network failures
        raise DatasetError(f"Fashion-MNIST could not be downloaded ({str(exc)[:120]}); {hint}") from None
    return ArrayData(x_train, y_train, x_test, y_test, source="keras.datasets.fashion_mnist")


def _candidates(roots: list[Path], depth: int = 2) -> list[Path]:
    """The roots and their sub-folders down to `depth` levels (hidden ones skipped)."""
    found, level = [], [Path(r) for r in roots if Path(r).is_dir()]
    for _ in range(depth + 1):
        found += level
        level = [c for p in level for c in sorted(p.iterdir()) if c.is_dir() and not c.name.startswith(".")]
    return found


def find_fashion_folders(roots: list[Path]) -> list[Path]:
    """Folders under the data roots that hold the four Fashion-MNIST idx files."""
    return [p for p in _candidates(roots) if all((p / name).is_file() for name in FASHION_FILES.values())]


def find_imdb_trees(roots: list[Path]) -> list[Path]:
    """aclImdb trees under the data roots."""
    return [p for p in _candidates(roots) if p.name == IMDB_FOLDER and find_imdb(p) == p]


# ------------------------------------------------------------------ IMDB (aclImdb)


def find_imdb(folder: str | Path) -> Path | None:
    """`folder` itself when it is an aclImdb tree, or its aclImdb/ child; else None."""
    folder = Path(folder)
    for candidate in (folder, folder / IMDB_FOLDER):
        if all((candidate / split / label).is_dir() for split in ("train", "test") for label in IMDB_CLASSES):
            return candidate
    return None


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
