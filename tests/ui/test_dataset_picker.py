"""ui/dataset_picker.py: the data roots are scanned once, and again only when a dataset appears or changes
(issue 18 point 11)."""

from __future__ import annotations

from unittest import mock

from dlguide_core.data import image_folders
from tests.support.toy_data import write_toy_dataset
from ui.dataset_picker import datasets_in_roots, scan_datasets


def test_the_scan_is_cached_until_a_dataset_appears(tmp_path) -> None:
    scan_datasets.clear()
    roots = tmp_path / "roots"
    write_toy_dataset(roots / "one", classes=2, per_class=2, val_per_class=1)
    with mock.patch.object(image_folders, "find_datasets", wraps=image_folders.find_datasets) as scan:
        assert [d.path.name for d in datasets_in_roots([roots])] == ["one"]
        assert [d.path.name for d in datasets_in_roots([roots])] == ["one"]
        assert scan.call_count == 1  # a rerun costs a few stats, not a walk over every image
        write_toy_dataset(roots / "two", classes=2, per_class=2, val_per_class=1)
        assert [d.path.name for d in datasets_in_roots([roots])] == ["one", "two"]
        assert scan.call_count == 2
    scan_datasets.clear()
