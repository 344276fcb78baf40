"""Small datasets in exactly the formats of the real ones, for the TensorFlow recipe tests.

Fashion-MNIST: the four gzipped idx files. Each class draws a bright bar at its own
rows on a dark noisy ground, so a real model learns it in a few epochs.
IMDB: an aclImdb/ tree (train|test × pos|neg, `<id>_<rating>.txt`, plus the unsup
folder the guide deletes), with sentiment words mixed into neutral filler and the
`<br />` tags and punctuation the guide's standardisation strips.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

IDX_CODES = {np.dtype("uint8"): 0x08, np.dtype(">i4"): 0x0C, np.dtype(">f4"): 0x0D}
POSITIVE = ("great", "wonderful", "superb", "loved", "brilliant")
NEGATIVE = ("awful", "terrible", "boring", "hated", "dreadful")
FILLER = ("the", "movie", "plot", "actor", "scene", "was", "and", "a", "film", "story")


def write_idx(path: Path, array: np.ndarray) -> Path:
    """The idx format: zero, zero, a type code, ndim; big-endian uint32 sizes; big-endian data."""
    header = bytes([0, 0, IDX_CODES[array.dtype], array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.tobytes())
    return path


def fashion_arrays(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, 10, count).astype(np.uint8)
    images = rng.integers(0, 40, (count, 28, 28)).astype(np.uint8)  # dark noise, like the dataset's ground
    for i, label in enumerate(labels):
        images[i, 3 + 2 * label: 5 + 2 * label, 4:24] = 230
    return images, labels


def write_fashion(folder: Path, train: int = 512, test: int = 64, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", train), ("t10k", test)):
        images, labels = fashion_arrays(count, rng)
        write_idx(folder / f"{split}-images-idx3-ubyte.gz", images)
        write_idx(folder / f"{split}-labels-idx1-ubyte.gz", labels)
    return folder


def review(rng: np.random.Generator, words: tuple[str, ...]) -> str:
    tokens = [*rng.choice(FILLER, 10), *rng.choice(words, 3)]
    rng.shuffle(tokens)
    return " ".join(tokens).capitalize() + "!<br /><br />The END, really..."


def write_imdb(parent: Path, per_class: int = 50, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    root = parent / "aclImdb"
    for split in ("train", "test"):
        for label, words in (("pos", POSITIVE), ("neg", NEGATIVE)):
            folder = root / split / label
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                rating = rng.integers(7, 11) if label == "pos" else rng.integers(1, 5)
                (folder / f"{i}_{rating}.txt").write_text(review(rng, words))
    unsup = root / "train" / "unsup"  # unlabelled reviews: must not become a third class
    unsup.mkdir()
    (unsup / "0_0.txt").write_text("an unlabelled review")
    return root
