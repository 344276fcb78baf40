"""Issue 33 (partly fixed before): a class folder that links outside the dataset and the data roots is not
followed; a class folder with no image is one line (the foreground run printed torchvision's traceback)."""

from __future__ import annotations

import pytest

from dlguide_core.cli.main import main
from dlguide_core.data.image_folders import detect, load_data
from dlguide_core.errors import DatasetError
from tests.support.toy_data import write_toy_dataset


@pytest.fixture
def roots(tmp_path, monkeypatch):
    roots = tmp_path / "roots"
    write_toy_dataset(roots / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(roots))
    return roots


def test_a_class_folder_linking_outside_the_data_roots_is_skipped(roots, tmp_path, capsys) -> None:
    outside = write_toy_dataset(tmp_path / "elsewhere", classes=1, per_class=2, val_per_class=1)
    (roots / "toy" / "train" / "stolen").symlink_to(outside / "train" / "class_0", target_is_directory=True)
    (roots / "toy" / "train" / "kept").symlink_to(roots / "toy" / "train" / "class_1", target_is_directory=True)
    bundle = load_data("cifar_net", roots / "toy", image_size=32)
    assert bundle.class_names == ("class_0", "class_1", "kept")
    assert all("elsewhere" not in path for path, _ in bundle.train.samples)
    assert "skipped class folder stolen: it links outside the dataset and the data roots" in capsys.readouterr().err
    assert "stolen" not in detect(roots / "toy").classes


def test_an_empty_class_is_one_line_in_a_foreground_run(roots, capsys) -> None:
    (roots / "toy" / "train" / "empty").mkdir()
    with pytest.raises(DatasetError, match="Found no valid file for the classes empty"):
        load_data("cifar_net", roots / "toy", image_size=32)
    code = main(["train", "--recipe", "cifar_net", "--data", str(roots / "toy"), "--epochs", "1", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and "Found no valid file for the classes empty" in err


def test_the_no_valid_file_message_lists_only_the_formats_that_are_read(roots) -> None:
    """Issue 43 (P10): the message listed .tif and .ppm, which the decoders refuse."""
    from PIL import Image

    (roots / "toy" / "train" / "scans").mkdir()
    Image.new("RGB", (32, 32)).save(roots / "toy" / "train" / "scans" / "a.tif")
    with pytest.raises(DatasetError, match="Found no valid file for the classes scans") as err:
        load_data("cifar_net", roots / "toy", image_size=32)
    message = str(err.value)
    assert ".jpg" in message and ".png" in message and ".webp" in message
    assert ".tif" not in message and ".ppm" not in message and "\n" not in message
