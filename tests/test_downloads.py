"""downloads.download_file through a local file:// URL: progress, checksum, atomicity, offline."""

import hashlib
from pathlib import Path

import pytest

from dlguide_core.data import archives
from dlguide_core.downloads import DownloadFailed, download_file
from dlguide_core.errors import DatasetError


@pytest.fixture
def online(monkeypatch):
    monkeypatch.delenv("DLGUIDE_OFFLINE", raising=False)


def test_download_reports_progress_and_checks_the_hash(tmp_path: Path, online) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"x" * (3 << 20))
    seen: list[tuple[int, int]] = []
    dest = download_file(source.as_uri(), tmp_path / "out" / "weights.bin", progress=lambda d, t: seen.append((d, t)),
                         sha256_prefix=hashlib.sha256(source.read_bytes()).hexdigest()[:8])
    assert dest.read_bytes() == source.read_bytes()
    assert seen[-1][0] == 3 << 20 and len(seen) >= 3


def test_a_checksum_mismatch_leaves_nothing_behind(tmp_path: Path, online) -> None:
    source = tmp_path / "tampered.bin"
    source.write_bytes(b"not what was published")
    with pytest.raises(DownloadFailed, match="checksum mismatch"):
        download_file(source.as_uri(), tmp_path / "out" / "weights.bin", sha256_prefix="0cc3c7bd")
    assert list((tmp_path / "out").iterdir()) == []


def test_offline_mode_refuses_before_touching_the_network(tmp_path: Path) -> None:
    with pytest.raises(DownloadFailed, match="offline"):
        download_file("https://example.invalid/x", tmp_path / "x")


def test_a_dataset_archive_with_the_wrong_md5_is_removed(tmp_path: Path, online) -> None:
    source = tmp_path / "tiny-imagenet-200.zip"
    source.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(DatasetError, match="checksum mismatch"):
        archives.fetch_archive(source.as_uri(), "0" * 32, tmp_path / "dl" / "t.zip", None, "tiny-imagenet")
    assert not (tmp_path / "dl" / "t.zip").exists()
