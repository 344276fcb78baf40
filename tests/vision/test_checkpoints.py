"""Broken and hostile checkpoint files: each gets one CheckpointError line before any model is built, and
`classify --weights F` prints that line and exits 2 (issue 18 point 4). The files are generated here."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from dlguide_core.cli.main import main
from dlguide_core.errors import CheckpointError
from dlguide_core.vision.checkpoints import save_checkpoint
from dlguide_core.vision.models import CIFAR10_CLASSES, load_model
from dlguide_core.vision.presets import CIFAR_EVAL
from dlguide_core.vision.small_cnn import CifarNet


def good_payload() -> dict:
    torch.manual_seed(0)
    return {"arch": "cifar_net", "arch_kwargs": {"num_classes": 10}, "class_names": list(CIFAR10_CLASSES),
            "preset": CIFAR_EVAL.to_dict(), "model": CifarNet().state_dict()}


def _wide_head() -> dict:
    torch.manual_seed(0)
    return {**good_payload(), "model": CifarNet(12).state_dict()}


BROKEN = {
    "wrong head shapes": (_wide_head, "fc3.weight has shape"),
    "fewer names than outputs": (lambda: {**good_payload(), "class_names": list(CIFAR10_CLASSES[:7])},
                                 "10 outputs but the file names 7 classes"),
    "unknown arch": (lambda: {**good_payload(), "arch": "resnet9000"}, "unknown architecture 'resnet9000'"),
    "crop exceeds resize": (lambda: {**good_payload(), "preset": {**CIFAR_EVAL.to_dict(), "crop": 64}},
                            "crop .64. cannot exceed resize"),
    "negative class count": (lambda: {**good_payload(), "arch_kwargs": {"num_classes": -3}}, "num_classes must"),
    "huge class count": (lambda: {**good_payload(), "arch_kwargs": {"num_classes": 10**13}}, "num_classes must"),
    "names not strings": (lambda: {**good_payload(), "class_names": list(range(10))}, "not a list of names"),
    "model not a state dict": (lambda: {**good_payload(), "model": torch.zeros(3)}, "not a state dict"),
    "missing tensor": (lambda: {**good_payload(), "model": {k: v for k, v in CifarNet().state_dict().items()
                                                             if k != "conv1.bias"}}, "lacks conv1.bias"),
    "huge preset": (lambda: {**good_payload(), "preset": {**CIFAR_EVAL.to_dict(), "resize": 10**9, "crop": 10}},
                    "resize and crop must be"),
    "nan std": (lambda: {**good_payload(), "preset": {**CIFAR_EVAL.to_dict(), "std": [float("nan")] * 3}},
                "std at least 1e-06"),
    # issue 33: 1e-300 is above 0, but 0 in float32 (torchvision's Normalize then raised: a traceback, exit 1)
    "std that float32 makes 0": (lambda: {**good_payload(), "preset": {**CIFAR_EVAL.to_dict(), "std": [1e-300] * 3}},
                                 "std at least 1e-06"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_checkpoint_is_one_checkpoint_error(case, tmp_path):
    make, message = BROKEN[case]
    path = save_checkpoint(tmp_path / "broken.pt", make())
    with pytest.raises(CheckpointError, match=message) as info:
        load_model(str(path), device="cpu")
    assert "\n" not in str(info.value) and str(info.value).startswith("broken.pt: ")


def test_a_valid_checkpoint_still_loads(tmp_path):
    loaded = load_model(str(save_checkpoint(tmp_path / "good.pt", good_payload())), device="cpu")
    assert loaded.class_names == CIFAR10_CLASSES


def test_foreign_files_are_refused_in_one_line(tmp_path):
    bare = tmp_path / "bare.pt"
    torch.save(torch.zeros(4), bare)
    rng = random.Random(18)
    files = [bare, Path("/etc/passwd")]
    for i in range(200):
        path = tmp_path / f"random-{i}.pt"
        head = rng.choice([b"", b"PK\x03\x04", b"\x80\x02", b"\x80\x04\x95"])  # zip and pickle magics too
        path.write_bytes(head + rng.randbytes(rng.randrange(1, 4096)))
        files.append(path)
    for path in files:
        if not path.is_file():
            continue
        with pytest.raises(CheckpointError) as info:
            load_model(str(path), device="cpu")
        assert "\n" not in str(info.value), path


def test_classify_with_a_broken_checkpoint_prints_one_line_and_exits_2(capsys, tmp_path, sample_jpeg):
    path = save_checkpoint(tmp_path / "wide.pt", _wide_head())
    code = main(["classify", str(sample_jpeg), "--weights", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: wide.pt: fc3.weight has shape (12, 84)")
