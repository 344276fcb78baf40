"""Checkpoints written on the fly: a small CIFAR-style network, untrained but deterministic."""

from __future__ import annotations

from pathlib import Path

import torch

from dlguide_core.vision.checkpoints import save_checkpoint
from dlguide_core.vision.presets import CIFAR_EVAL
from dlguide_core.vision.small_cnn import CifarNet


def toy_checkpoint(path: Path, classes: tuple[str, ...]) -> Path:
    """A cifar_net checkpoint for `classes` (seeded weights), in the format our jobs save."""
    torch.manual_seed(0)
    return save_checkpoint(path, {"arch": "cifar_net", "arch_kwargs": {"num_classes": len(classes)},
                                  "class_names": list(classes), "preset": CIFAR_EVAL.to_dict(),
                                  "model": CifarNet(len(classes)).state_dict(), "job_id": "t", "epoch": 1})
