"""Evaluation metrics against hand-computed cases, the ImageNet -> synset restriction on a crafted
model, and a checkpoint scored on a toy ImageFolder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from dlguide_core.evaluation import (
    EvaluationError,
    confusion_matrix,
    evaluate_model,
    imagenet_wnids,
    label_space,
    per_class_accuracy,
    pick,
    top_confusions,
)
from dlguide_core.vision.models import LoadedModel, imagenet_class_names, load_model
from dlguide_core.vision.presets import EvalPreset
from tests.support.checkpoints import toy_checkpoint
from tests.support.paths import SHARED_TINY
from tests.support.toy_data import write_toy_dataset


def test_confusion_matrix_and_per_class_accuracy_by_hand() -> None:
    # class 0: 3 samples, 2 right, 1 -> class 2; class 1: 2 samples, both -> class 0; class 2: 1 right
    targets = [0, 0, 0, 1, 1, 2]
    preds = [0, 2, 0, 0, 0, 2]
    matrix = confusion_matrix(targets, preds, 4)
    expected = np.array([[2, 0, 1, 0], [2, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(matrix, expected)
    accuracy = per_class_accuracy(matrix)
    np.testing.assert_allclose(accuracy[:3], [200 / 3, 0.0, 100.0])
    assert np.isnan(accuracy[3])  # no samples: no accuracy, not 0 %
    assert top_confusions(matrix, ["a", "b", "c", "d"]) == [
        {"true": "b", "predicted": "a", "count": 2, "percent": 100.0},
        {"true": "a", "predicted": "c", "count": 1, "percent": 33.33}]


def test_pick_spreads_a_limit_over_every_class() -> None:
    assert pick(10, None) == list(range(10))
    assert pick(10, 50) == list(range(10))
    assert pick(100, 4) == [0, 33, 66, 99]


def test_imagenet_wnids_are_the_model_output_order() -> None:
    wnids = imagenet_wnids()
    assert len(wnids) == 1000 == len(set(wnids))
    assert list(wnids) == sorted(wnids)  # ILSVRC's class index is the sorted synset order
    assert wnids[1] == "n01443537" and imagenet_class_names()[1] == "goldfish"
    assert wnids[207] == "n02099601" and imagenet_class_names()[207] == "golden retriever"


class RedBlueDetector(nn.Module):
    """1000 ImageNet logits: 'tench' (0, absent from the data) always wins outright; among the
    data's classes, goldfish (1) wins on red images and Egyptian cat (285) on blue ones."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W) -> (B, 1000)
        red_minus_blue = (x[:, 0] - x[:, 2]).mean(dim=(1, 2))  # (B,)
        logits = torch.zeros(x.shape[0], 1000)
        logits[:, 0] = 50.0
        logits[:, 1] = self.scale * red_minus_blue
        logits[:, 285] = -self.scale * red_minus_blue
        return logits


def _imagenet_like(model: nn.Module) -> LoadedModel:
    return LoadedModel(model, "inception_v3", {}, imagenet_class_names(), EvalPreset(resize=8, crop=8),
                       "imagenet", True, "crafted ImageNet model", "crafted")


def _synset_folder(root: Path, colours: dict[str, tuple[int, int, int]], per_class: int = 3) -> Path:
    for wnid, colour in colours.items():
        folder = root / "val" / wnid
        folder.mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (8, 8), colour).save(folder / f"{i}.png")
    return root


def test_imagenet_model_is_restricted_to_the_synsets_present(tmp_path: Path) -> None:
    data = _synset_folder(tmp_path, {"n01443537": (230, 20, 20), "n02124075": (20, 20, 230)})
    result = evaluate_model(_imagenet_like(RedBlueDetector()), data, batch_size=4)
    # Unrestricted, every image would be called 'tench'; over the two classes present all are right.
    assert result.space.restricted and result.space.outputs == (1, 285)
    assert result.top1 == 100.0 and result.images == 6
    np.testing.assert_array_equal(result.matrix, [[3, 0], [0, 3]])
    assert result.space.labels == ("n01443537", "n02124075")  # no words.txt: ids are the labels
    out = result.to_json()
    assert out["restricted"] is True and "restricted-label score" in out["note"]
    assert out["per_class"] == {"n01443537": 100.0, "n02124075": 100.0}


def test_restricted_mistakes_and_loss(tmp_path: Path) -> None:
    # Swap the colours: every image is now confidently wrong, and the loss says so.
    data = _synset_folder(tmp_path, {"n01443537": (20, 20, 230), "n02124075": (230, 20, 20)}, per_class=2)
    result = evaluate_model(_imagenet_like(RedBlueDetector()), data, batch_size=3)
    assert result.top1 == 0.0 and result.top5 == 100.0  # two classes: the truth is always in the top 5
    assert len(result.mistakes) == 4 and all(m.prob > 0.5 for m in result.mistakes)
    assert result.mistakes[0].prob >= result.mistakes[-1].prob
    out = result.to_json()  # the `evaluate --json` keys, in the order they always came
    assert list(out) == ["top1", "top5", "loss", "per_class", "confusion", "images", "images_per_s", "seconds",
                         "restricted", "note", "weights", "data", "split", "top_confusions", "mistakes"]
    assert list(out["confusion"]) == ["classes", "labels", "matrix"]
    assert [list(m) for m in out["mistakes"]] == [["image", "true", "predicted", "prob"]] * 4
    assert [list(c) for c in out["top_confusions"]] == [["true", "predicted", "count", "percent"]] * 2
    red_minus_blue = (210 / 255) / 0.226  # normalised channel difference, about 3.6
    expected_loss = float(torch.nn.functional.softplus(torch.tensor(2 * red_minus_blue)))
    assert result.loss == pytest.approx(expected_loss, rel=0.02)
    assert "true\\predicted,n01443537,n02124075" in result.confusion_csv()


def test_imagenet_model_refuses_data_without_synset_ids(tmp_path: Path) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=1, val_per_class=1)
    with pytest.raises(EvaluationError, match="synset"):
        evaluate_model(_imagenet_like(RedBlueDetector()), data)




def test_checkpoint_on_toy_imagefolder(tmp_path: Path) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=1, val_per_class=4)
    loaded = load_model(str(toy_checkpoint(tmp_path / "c.pt", ("class_0", "class_1", "class_2"))), device="cpu")
    seen = []
    result = evaluate_model(loaded, data, batch_size=5, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(5, 12), (10, 12), (12, 12)]
    assert result.images == 12 and result.matrix.sum() == 12 and not result.space.restricted
    assert result.top1 == pytest.approx(100.0 * np.trace(result.matrix) / 12)
    assert result.top5 == 100.0  # three classes
    limited = evaluate_model(loaded, data, limit=3)
    assert limited.images == 3 and (limited.matrix.sum(axis=1) == 1).all()  # one image of each class
    assert set(result.to_json()) >= {"top1", "top5", "loss", "per_class", "confusion", "images", "images_per_s"}


def test_checkpoint_trained_on_other_classes_is_refused(tmp_path: Path) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=1, val_per_class=1)
    loaded = load_model(str(toy_checkpoint(tmp_path / "c.pt", ("cat", "dog", "class_2"))), device="cpu")
    with pytest.raises(EvaluationError, match="class_0"):
        label_space(loaded, ("class_0", "class_1", "class_2"), ("class_0", "class_1", "class_2"))
    with pytest.raises(EvaluationError, match="no test/ folder"):
        evaluate_model(loaded, data, split="test")


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_TINY / "val").is_dir(), reason="needs ../shared/data/tiny-imagenet-10")
def test_restriction_on_tiny_imagenet_ids(tmp_path: Path) -> None:
    """The shared tiny-imagenet-10's ids all map to ImageNet outputs (the data itself stays untouched)."""
    wnids = (SHARED_TINY / "wnids.txt").read_text().split()
    space = label_space(_imagenet_like(RedBlueDetector()), sorted(wnids), sorted(wnids))
    assert space.restricted and len(space.outputs) == 10
    assert [imagenet_class_names()[i] for i in space.outputs][:2] == ["goldfish", "koala"]


def test_an_unreadable_file_in_the_split_is_skipped_not_fatal(tmp_path: Path) -> None:
    """Issue 18: evaluation decodes like uploads; a corrupt file no longer ends it with UnidentifiedImageError."""
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=1, val_per_class=3)
    (data / "val" / "class_0" / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    checkpoint = toy_checkpoint(tmp_path / "c.pt", ("class_0", "class_1", "class_2"))
    result = evaluate_model(load_model(str(checkpoint), device="cpu"), data, batch_size=4)
    assert result.to_json()["images"] == 9
