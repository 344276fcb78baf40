"""datasets: the tiny-imagenet val preparation (idempotent, resumable, refuses broken layouts), loading."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dlguide_core.data import cifar10, image_folders, tiny_imagenet
from dlguide_core.data.image_folders import detect, load_data
from dlguide_core.data.tiny_imagenet import prepare_tiny_imagenet
from dlguide_core.errors import DatasetError
from tests.support.paths import SHARED_TINY
from tests.support.tiny_imagenet import WNIDS, tree, write_tiny_imagenet
from tests.support.toy_data import write_toy_dataset


def test_prepare_moves_val_into_class_folders_and_is_idempotent(tmp_path: Path) -> None:
    root = write_tiny_imagenet(tmp_path / "tin")
    assert detect(root).kind == "tiny-imagenet-unprepared"
    report = prepare_tiny_imagenet(root)
    assert (report.moved, report.already_in_place, report.classes) == (6, 0, 3)
    assert not (root / "val" / "images").exists()
    assert sorted(p.name for p in (root / "val" / WNIDS[1] / "images").iterdir()) == ["val_2.JPEG", "val_3.JPEG"]
    before = tree(root)
    again = prepare_tiny_imagenet(root)
    assert (again.moved, again.already_in_place) == (0, 6) and tree(root) == before
    assert detect(root).kind == "imagefolder"


def test_prepare_resumes_after_an_interruption(tmp_path: Path) -> None:
    root = write_tiny_imagenet(tmp_path / "tin")
    dest = root / "val" / WNIDS[0] / "images"
    dest.mkdir(parents=True)
    shutil.move(root / "val" / "images" / "val_0.JPEG", dest / "val_0.JPEG")  # as if killed after one move
    report = prepare_tiny_imagenet(root)
    assert (report.moved, report.already_in_place) == (5, 1)


@pytest.mark.parametrize("breakage", ["missing_file", "unannotated_file", "both_places"])
def test_prepare_refuses_an_inconsistent_layout_without_moving_anything(tmp_path: Path, breakage: str) -> None:
    root = write_tiny_imagenet(tmp_path / "tin")
    pending = root / "val" / "images"
    if breakage == "missing_file":
        (pending / "val_3.JPEG").unlink()
    elif breakage == "unannotated_file":
        shutil.copy(pending / "val_0.JPEG", pending / "stray.JPEG")
    else:
        (root / "val" / WNIDS[0] / "images").mkdir(parents=True)
        shutil.copy(pending / "val_0.JPEG", root / "val" / WNIDS[0] / "images" / "val_0.JPEG")
    before = tree(root)
    with pytest.raises(DatasetError, match="nothing was moved"):
        prepare_tiny_imagenet(root)
    assert tree(root) == before


def test_load_data_needs_preparation_then_uses_the_train_classes(tmp_path: Path) -> None:
    root = write_tiny_imagenet(tmp_path / "tin")
    with pytest.raises(DatasetError, match="prepare tiny-imagenet"):
        load_data("inception_v3", root, 75)
    prepare_tiny_imagenet(root)
    bundle = load_data("inception_v3", root, 75)
    assert bundle.class_names == WNIDS and len(bundle.train) == 9 and len(bundle.val) == 6
    image, label = bundle.train[0]
    assert tuple(image.shape) == (3, 75, 75) and label == 0
    assert tuple(bundle.val[5][0].shape) == (3, 75, 75) and bundle.val[5][1] == 2
    assert bundle.eval_preset.resize == 86 and bundle.eval_preset.crop == 75  # 342/299 of the crop


def test_find_datasets_and_toy_data(tmp_path: Path) -> None:
    write_toy_dataset(tmp_path / "root" / "toy", classes=2, per_class=3, val_per_class=1)
    (tmp_path / "root" / "not-a-dataset").mkdir()
    (found,) = image_folders.find_datasets([tmp_path / "root"])
    assert found.path.name == "toy" and found.train_counts == {"class_0": 3, "class_1": 3} and found.val_count == 2
    assert [len(v) for v in image_folders.sample_paths(found, per_class=2).values()] == [2, 2]


def test_downloads_fail_offline_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="tiny-imagenet-200 could not be downloaded.*copy it to"):
        tiny_imagenet.fetch_tiny_imagenet(tmp_path)
    with pytest.raises(DatasetError, match="CIFAR-10 could not be downloaded"):
        cifar10.fetch_cifar10(tmp_path)


@pytest.mark.skipif(not SHARED_TINY.is_dir(), reason="../shared/data/tiny-imagenet-10 is not here (fresh clone)")
def test_prepare_the_real_tiny_imagenet_cut(tmp_path: Path) -> None:
    root = Path(shutil.copytree(SHARED_TINY, tmp_path / "tin"))
    report = prepare_tiny_imagenet(root)
    assert (report.moved, report.classes) == (500, 10)
    info = detect(root)
    assert info.kind == "imagefolder" and info.val_count == 500 and info.train_count == 1000


class _Payload:
    """A pickle that would create a file if anything unpickled it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_forged_cifar10_folder_is_refused_without_unpickling(tmp_path: Path) -> None:
    import pickle

    folder = tmp_path / "cifar" / cifar10.CIFAR10_FOLDER
    folder.mkdir(parents=True)
    marker = tmp_path / "pwned"
    for name in ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch",
                 "batches.meta"):
        (folder / name).write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(DatasetError, match="incomplete or corrupt"):
        load_data("cifar_net", tmp_path / "cifar")
    assert not marker.exists()  # torchvision's md5 check refused the files before unpickling them


@pytest.mark.parametrize("wnid", ["../../../escaped", "/tmp/abs", "a/b", ".."])
def test_an_annotation_whose_class_id_is_a_path_moves_nothing(tmp_path: Path, wnid: str) -> None:
    """A crafted val_annotations.txt must not steer files outside the dataset folder."""
    root = write_tiny_imagenet(tmp_path / "tin")
    annotations = root / "val" / "val_annotations.txt"
    lines = annotations.read_text().splitlines()
    lines[0] = "\t".join([lines[0].split("\t")[0], wnid, *lines[0].split("\t")[2:]])
    annotations.write_text("\n".join(lines) + "\n")
    before = tree(tmp_path)
    with pytest.raises(DatasetError, match="names a path"):
        prepare_tiny_imagenet(root)
    assert tree(tmp_path) == before


def test_words_txt_gives_readable_class_names(tmp_path: Path) -> None:
    root = write_tiny_imagenet(tmp_path / "tin")
    (root / "words.txt").write_text("n01443537\tgoldfish, Carassius auratus\nn02124075\tEgyptian cat\n"
                                    "n99999999\tunused\n")
    prepare_tiny_imagenet(root)
    bundle = load_data("inception_v3", root, image_size=75)
    assert bundle.class_names == WNIDS  # ImageFolder's order, what the model's outputs mean
    assert bundle.display_names == ("goldfish", "Egyptian cat", "n07749582")  # no entry: the id stays


# ------------------------------------------------------------- paths stay in the roots (issue 18 points 8, 13)


def test_prepare_never_moves_a_file_through_a_symlink_out_of_the_dataset(tmp_path: Path) -> None:
    root = write_tiny_imagenet(tmp_path / "roots" / "tiny")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "val" / WNIDS[0]).symlink_to(outside, target_is_directory=True)
    before = tree(root)
    with pytest.raises(DatasetError, match="leads outside"):
        prepare_tiny_imagenet(root)
    assert tree(root) == before and not any(outside.iterdir())


def test_the_dataset_picker_does_not_follow_a_symlink_out_of_its_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    write_toy_dataset(root / "inside")
    write_toy_dataset(tmp_path / "secret")
    (root / "link").symlink_to(tmp_path / "secret", target_is_directory=True)
    (root / "alias").symlink_to(root / "inside", target_is_directory=True)  # stays in the root: kept once
    found = image_folders.find_datasets([root])
    assert [info.path for info in found] == [(root / "inside").resolve()]


def test_non_utf8_annotations_are_one_dataset_error(tmp_path: Path) -> None:
    root = write_tiny_imagenet(tmp_path / "tiny")
    (root / "val" / "val_annotations.txt").write_bytes(b"val_0.JPEG\tn\xe9\xff\t0\n")
    with pytest.raises(DatasetError, match="not UTF-8 text"):
        prepare_tiny_imagenet(root)


def test_resnet50_trains_and_validates_with_its_own_presets_not_inceptions(tmp_path: Path) -> None:
    """Issue 23's train/serve skew: load_data gave every architecture but the CIFAR CNN Inception's 342/299 val
    resize; ResNet-50 validates as its ImageNet weights were evaluated, 232/224 of the crop."""
    root = write_toy_dataset(tmp_path / "toy", classes=2, per_class=1, val_per_class=1, size=72)
    bundle = load_data("resnet50", root, 64)
    assert (bundle.train_preset.crop, bundle.eval_preset.crop, bundle.eval_preset.resize) == (64, 64, 66)
    assert tuple(bundle.val[0][0].shape) == (3, 64, 64)
    assert load_data("resnet50", root).eval_preset.resize == 232  # its recipe's 224 px by default
