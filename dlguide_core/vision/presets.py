"""Preprocessing presets: one pure function per recipe, shared by every consumer.

Training, classification, ONNX export and every inference backend call
`preprocess` with the preset stored alongside the model, so there is no
train/serve skew from a page doing its own Resize.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch and torchvision load when a transform is built, not when a preset is declared
    import torch
    from PIL import Image

    from dlguide_core.torchvision_lib import transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_INTERPOLATIONS = ("bilinear", "bicubic", "nearest")  # torchvision InterpolationMode values


def _interpolation(name: str) -> transforms.InterpolationMode:
    from dlguide_core.torchvision_lib import transforms

    return transforms.InterpolationMode(name)


@dataclass(frozen=True)
class EvalPreset:
    """The guide's evaluation transform: Resize, CenterCrop, ToTensor, Normalize."""

    resize: int = 299
    crop: int = 299
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        if self.interpolation not in _INTERPOLATIONS:
            choices = ", ".join(sorted(_INTERPOLATIONS))
            raise ValueError(f"interpolation must be one of {choices}, not {self.interpolation!r}")
        if self.crop > self.resize:
            raise ValueError(f"crop ({self.crop}) cannot exceed resize ({self.resize})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalPreset:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        for key in ("mean", "std"):
            if key in fields:
                fields[key] = tuple(float(v) for v in fields[key])
        return cls(**fields)


GUIDE_EVAL = EvalPreset()
CIFAR_EVAL = EvalPreset(resize=32, crop=32, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))


def eval_transform(preset: EvalPreset = GUIDE_EVAL) -> transforms.Compose:
    """The torchvision Compose for `preset` (PIL image in, (3, crop, crop) float tensor out)."""
    from dlguide_core.torchvision_lib import transforms

    return transforms.Compose(
        [
            transforms.Resize(preset.resize, interpolation=_interpolation(preset.interpolation)),
            transforms.CenterCrop(preset.crop),
            transforms.ToTensor(),
            transforms.Normalize(preset.mean, preset.std),
        ]
    )


def preprocess(images: Sequence[Image.Image], preset: EvalPreset = GUIDE_EVAL) -> torch.Tensor:
    """RGB PIL images -> normalised batch (B, 3, crop, crop), float32."""
    import torch

    transform = eval_transform(preset)
    return torch.stack([transform(img) for img in images])


def denormalize(batch: torch.Tensor, preset: EvalPreset = GUIDE_EVAL) -> torch.Tensor:
    """Undo Normalize for display: (B, 3, H, W) -> values in [0, 1]."""
    import torch

    mean = torch.tensor(preset.mean).view(1, 3, 1, 1)
    std = torch.tensor(preset.std).view(1, 3, 1, 1)
    return (batch * std + mean).clamp(0, 1)


@dataclass(frozen=True)
class TrainPreset:
    """The guide's training transform: RandomResizedCrop, PILToTensor, ConvertImageDtype, Normalize.

    `random_resized_crop=False` keeps the image size (CIFAR's ToTensor + Normalize).
    """

    crop: int = 299
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    interpolation: str = "bilinear"
    random_resized_crop: bool = True
    hflip: bool = False

    def __post_init__(self) -> None:
        if self.interpolation not in _INTERPOLATIONS:
            choices = ", ".join(sorted(_INTERPOLATIONS))
            raise ValueError(f"interpolation must be one of {choices}, not {self.interpolation!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


GUIDE_TRAIN = TrainPreset()
CIFAR_TRAIN = TrainPreset(crop=32, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), random_resized_crop=False)


def scaled_presets(image_size: int, reference: EvalPreset) -> tuple[TrainPreset, EvalPreset]:
    """Train/val presets at `image_size`: RandomResizedCrop to it, and a val Resize that keeps `reference`'s
    resize/crop ratio (342/299 for Inception v3's recipe) before the CenterCrop to it."""
    resize = max(image_size, round(image_size * reference.resize / reference.crop))
    return (TrainPreset(crop=image_size, mean=reference.mean, std=reference.std),
            EvalPreset(resize=resize, crop=image_size, mean=reference.mean, std=reference.std,
                       interpolation=reference.interpolation))


def train_transform(preset: TrainPreset = GUIDE_TRAIN) -> transforms.Compose:
    """The torchvision Compose for `preset` (PIL image in, (3, crop, crop) float tensor out)."""
    import torch

    from dlguide_core.torchvision_lib import transforms

    steps: list[Any] = []
    if preset.random_resized_crop:
        steps.append(transforms.RandomResizedCrop(preset.crop, interpolation=_interpolation(preset.interpolation)))
    if preset.hflip:
        steps.append(transforms.RandomHorizontalFlip())
    steps += [transforms.PILToTensor(), transforms.ConvertImageDtype(torch.float),
              transforms.Normalize(preset.mean, preset.std)]
    return transforms.Compose(steps)
