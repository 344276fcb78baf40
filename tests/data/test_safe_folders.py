"""One bad image does not fail a training job (issue 18 point 5): the loaders decode like uploads, skip and
count unreadable files, report them (job log, `jobs show --json` skipped_files), and a resume works too."""

from __future__ import annotations

import json

import pytest

from dlguide_core.cli.main import main
from dlguide_core.data.image_folders import load_data
from dlguide_core.data.safe_folders import SafeImageFolder
from dlguide_core.errors import DatasetError
from tests.support.toy_data import spoil, write_toy_dataset


def test_unreadable_files_are_skipped_and_counted(tmp_path):
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=6, val_per_class=1)
    bad = spoil(data)
    bundle = load_data("cifar_net", data, 32)
    assert bundle.skipped.count == 3 and len(bundle.skipped.examples) == 3
    assert all(any(str(p) in e for e in bundle.skipped.examples) for p in bad)
    assert len(bundle.train) == 12 and all(bundle.train[i][0].shape == (3, 32, 32) for i in range(12))


def test_a_truncated_file_is_replaced_by_the_next_readable_one(tmp_path, capsys):
    data = write_toy_dataset(tmp_path / "toy", classes=1, per_class=3, val_per_class=1)
    first = sorted((data / "train" / "class_0").iterdir())[0]
    first.write_bytes(first.read_bytes()[:200])  # the header survives, the pixels do not
    folder = SafeImageFolder(str(data / "train"))
    image, label = folder[0]
    assert image.size == (32, 32) and label == 0
    assert "skipped unreadable file" in capsys.readouterr().err


def test_too_many_unreadable_files_is_one_dataset_error(tmp_path):
    data = write_toy_dataset(tmp_path / "toy", classes=1, per_class=2, val_per_class=1)
    spoil(data)
    (data / "train" / "class_0" / "more.png").write_bytes(b"")
    with pytest.raises(DatasetError, match=r"4 of 6 files in .* are unreadable"):
        load_data("cifar_net", data, 32)


def test_a_job_on_a_spoilt_dataset_succeeds_and_reports_them(tmp_path, capsys):
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=4, val_per_class=1)
    spoil(data)
    argv = ["train", "--recipe", "cifar_net", "--data", str(data), "--epochs", "1", "--workers", "0",
            "--device", "cpu", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    job_id = json.loads(captured.out)["job_id"]
    assert "skipped 3 unreadable file(s)" in captured.err
    assert main(["jobs", "show", job_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "succeeded"
    assert shown["skipped_files"]["count"] == 3 and len(shown["skipped_files"]["examples"]) == 3


def test_prepare_reports_unreadable_files_up_front(tmp_path, capsys):
    from tests.support.tiny_imagenet import WNIDS, write_tiny_imagenet

    root = write_tiny_imagenet(tmp_path / "tiny")
    (root / "train" / WNIDS[1] / "images" / "broken.JPEG").write_bytes(b"\xff\xd8\xff nothing more")
    assert main(["prepare", "tiny-imagenet", str(root), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["unreadable"]["count"] == 1 and "broken.JPEG" in report["unreadable"]["examples"][0]
    assert "warning: 1 unreadable file(s) will be skipped by training" in captured.err
