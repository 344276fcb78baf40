"""fashion_mnist and imdb: idx parsing, finding the local copies, and the offline messages (no TensorFlow needed)."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

import numpy as np
import pytest

from dlguide_core.data import fashion_mnist, imdb
from dlguide_core.errors import DatasetError
from tests.support.tf_datagen import write_fashion, write_idx, write_imdb


def test_read_idx_round_trips_every_shape_and_type(tmp_path: Path) -> None:
    images = np.random.default_rng(0).integers(0, 256, (5, 28, 28)).astype(np.uint8)
    ints = np.arange(-3, 3, dtype=">i4")
    assert np.array_equal(fashion_mnist.read_idx(write_idx(tmp_path / "a.gz", images)), images)
    parsed = fashion_mnist.read_idx(write_idx(tmp_path / "b.gz", ints))
    assert parsed.tolist() == ints.tolist() and parsed.dtype.isnative


def test_read_idx_refuses_foreign_and_truncated_files(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.gz"
    with gzip.open(foreign, "wb") as fh:
        fh.write(b"PK\x03\x04 not idx at all")
    with pytest.raises(DatasetError, match="bad magic"):
        fashion_mnist.read_idx(foreign)
    short = tmp_path / "short.gz"
    data = gzip.decompress(write_idx(tmp_path / "ok.gz", np.zeros((4, 28, 28), np.uint8)).read_bytes())
    short.write_bytes(gzip.compress(data[:-10]))
    with pytest.raises(DatasetError, match=r"header says \(4, 28, 28\)"):
        fashion_mnist.read_idx(short)
    (tmp_path / "plain.gz").write_bytes(b"not gzip")
    with pytest.raises(DatasetError, match="not a readable .gz"):
        fashion_mnist.read_idx(tmp_path / "plain.gz")


def test_fashion_folder_is_found_one_level_down_and_loaded(tmp_path: Path) -> None:
    write_fashion(tmp_path / "fashion-mnist", train=20, test=8)
    data = fashion_mnist.load_fashion_mnist(tmp_path)
    assert data.train_images.shape == (20, 28, 28) and data.train_images.dtype == np.uint8
    assert data.test_labels.shape == (8,) and int(data.test_labels.max()) < 10
    assert data.source.endswith("fashion-mnist")


def test_incomplete_fashion_folder_names_the_missing_files(tmp_path: Path) -> None:
    write_fashion(tmp_path, train=4, test=4)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DatasetError, match="t10k-labels-idx1-ubyte.gz"):
        fashion_mnist.load_fashion_mnist(tmp_path)


def test_mismatched_fashion_labels_are_refused(tmp_path: Path) -> None:
    write_fashion(tmp_path, train=6, test=4)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.zeros(5, np.uint8))
    with pytest.raises(DatasetError, match="do not match labels"):
        fashion_mnist.load_fashion_mnist(tmp_path)


def test_offline_fashion_without_local_copy_says_what_to_download() -> None:
    with pytest.raises(DatasetError) as info:
        fashion_mnist.load_fashion_mnist("")
    message = str(info.value)
    assert "offline" in message and fashion_mnist.FASHION_URL in message and "train-images-idx3-ubyte.gz" in message
    assert "\n" not in message


def test_imdb_tree_is_found_from_itself_or_its_parent(tmp_path: Path) -> None:
    root = write_imdb(tmp_path, per_class=2)
    assert imdb.locate_imdb(tmp_path) == root
    assert imdb.locate_imdb(root) == root
    with pytest.raises(DatasetError, match="pos/ and neg/"):
        imdb.locate_imdb(root / "train")


def test_offline_imdb_without_local_copy_says_what_to_download(isolated_home: Path) -> None:
    with pytest.raises(DatasetError) as info:
        imdb.locate_imdb("")
    message = str(info.value)
    assert imdb.IMDB_URL in message and str(isolated_home / "data" / "aclImdb") in message
    assert "\n" not in message


def test_fetch_imdb_unpacks_the_tarball_without_unsup(tmp_path: Path) -> None:
    write_imdb(tmp_path / "src", per_class=2)
    into = tmp_path / "data"
    into.mkdir()
    with tarfile.open(into / "aclImdb_v1.tar.gz", "w:gz") as tar:  # as if the download had finished
        tar.add(tmp_path / "src" / "aclImdb", arcname="aclImdb")
    root = imdb.fetch_imdb(into)
    assert root == into / "aclImdb"
    assert len(list((root / "test" / "neg").glob("*.txt"))) == 2
    assert not (root / "train" / "unsup").exists()
    assert not (into / "aclImdb_v1.tar.gz").exists()


def test_offline_fashion_hint_names_a_folder_inside_the_data_roots(tmp_path: Path, monkeypatch) -> None:
    """The fix must be one the Train page can pick up: a folder under a configured root (issue 24)."""
    (tmp_path / "roots").mkdir()
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    with pytest.raises(DatasetError) as failure:
        fashion_mnist.load_fashion_mnist("")
    assert f"(e.g. {(tmp_path / 'roots').resolve() / 'fashion-mnist'})" in str(failure.value)
