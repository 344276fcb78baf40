"""Model architectures and weight sources.

Weight sources (the `--weights` argument everywhere):
- "imagenet": torchvision's IMAGENET1K_V1 Inception v3 from the TORCH_HOME cache,
  downloaded with progress when online; offline, WeightsUnavailable names the file.
- "none": random init, always labelled untrained.
- a path: a checkpoint written by dlguide training (see checkpoints.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torchvision.models import Inception_V3_Weights, inception_v3

from dlguide_core.downloads import DownloadFailed, ProgressFn, download_file
from dlguide_core.errors import CheckpointError, WeightsUnavailable
from dlguide_core.vision.checkpoints import load_checkpoint
from dlguide_core.vision.presets import CIFAR_EVAL, GUIDE_EVAL, EvalPreset

IMAGENET_WEIGHTS = Inception_V3_Weights.IMAGENET1K_V1
IMAGENET_FILENAME = "inception_v3_google-0cc3c7bd.pth"
IMAGENET_SHA256_PREFIX = "0cc3c7bd"
WEIGHT_CHOICES = ("imagenet", "none")
CIFAR10_CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


class CifarNet(nn.Module):
    """The guide's CIFAR-10 CNN, with the `fc1` layer the guide's listing forgets to define."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, 32, 32) -> (B, classes)
        x = self.pool(torch.relu(self.conv1(x)))  # (B, 6, 14, 14)
        x = self.pool(torch.relu(self.conv2(x)))  # (B, 16, 5, 5)
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def _build_inception(num_classes: int = 1000, transform_input: bool = False, **_: Any) -> nn.Module:
    # aux_logits=True so ImageNet state dicts (which hold AuxLogits) load strictly;
    # the head is dropped afterwards by `drop_aux_head`, as torchvision itself does.
    return inception_v3(
        weights=None,
        num_classes=num_classes,
        aux_logits=True,
        transform_input=transform_input,
        init_weights=False,
    )


def _build_cifar(num_classes: int = 10, **_: Any) -> nn.Module:
    return CifarNet(num_classes)


ARCHITECTURES: dict[str, Callable[..., nn.Module]] = {
    "inception_v3": _build_inception,
    "cifar_net": _build_cifar,
}


def build_model(arch: str, **kwargs: Any) -> nn.Module:
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[arch](**kwargs)


def drop_aux_head(model: nn.Module) -> nn.Module:
    if getattr(model, "AuxLogits", None) is not None:
        model.aux_logits = False
        model.AuxLogits = None
    return model


@dataclass(frozen=True)
class LoadedModel:
    """A model ready for inference, with everything needed to label and preprocess for it."""

    model: nn.Module = field(repr=False, compare=False)
    arch: str
    arch_kwargs: dict[str, Any] = field(compare=False)
    class_names: tuple[str, ...] = field(repr=False)
    preset: EvalPreset
    source: str  # "imagenet", "none" or the checkpoint path
    trained: bool
    label: str
    fingerprint: str  # hash of the weights, keys caches of exports and compiled programs

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def imagenet_weights_path() -> Path:
    return Path(torch.hub.get_dir()) / "checkpoints" / IMAGENET_FILENAME


def imagenet_class_names() -> tuple[str, ...]:
    return tuple(IMAGENET_WEIGHTS.meta["categories"])


def fetch_imagenet_weights(progress: ProgressFn | None = None) -> Path:
    """The cached IMAGENET1K_V1 file, downloading it (checksum-verified) if missing."""
    path = imagenet_weights_path()
    if path.is_file():
        return path
    try:
        return download_file(IMAGENET_WEIGHTS.url, path, progress=progress, sha256_prefix=IMAGENET_SHA256_PREFIX)
    except DownloadFailed as exc:
        raise WeightsUnavailable(
            f"ImageNet weights {IMAGENET_FILENAME} are not cached and could not be downloaded ({exc}). "
            f"Download {IMAGENET_WEIGHTS.url} on a machine with internet and copy it to {path} "
            "(or set TORCH_HOME to the folder that holds checkpoints/)."
        ) from None


def load_model(weights: str = "imagenet", *, device: str | torch.device | None = None,
               progress: ProgressFn | None = None) -> LoadedModel:
    """Resolve a weights source into an eval-mode LoadedModel on `device` (best available by default)."""
    if weights == "imagenet":
        loaded = _load_imagenet(progress)
    elif weights == "none":
        loaded = _load_untrained()
    else:
        loaded = _load_from_checkpoint(Path(weights))
    from dlguide_core.devices import best_device

    target = torch.device(device) if device is not None else best_device()
    loaded.model.to(target).eval()
    if target.type == "cpu":
        # oneDNN's convolutions run ~20% faster on NHWC here (docs/BENCHMARKS.md, issue 2);
        # inputs follow in classify.predict_logits. GPUs keep the layout their kernels prefer.
        loaded.model.to(memory_format=torch.channels_last)
    return loaded


def _load_imagenet(progress: ProgressFn | None) -> LoadedModel:
    path = fetch_imagenet_weights(progress)
    state = torch.load(path, map_location="cpu", weights_only=True)
    kwargs = {"num_classes": 1000, "transform_input": True}  # Google's weights expect [-1, 1] inputs
    model = build_model("inception_v3", **kwargs)
    model.load_state_dict(state)
    drop_aux_head(model)
    return LoadedModel(model, "inception_v3", kwargs, imagenet_class_names(), GUIDE_EVAL, "imagenet",
                       True, "ImageNet (torchvision IMAGENET1K_V1)", state_fingerprint(model.state_dict()))


def _load_untrained() -> LoadedModel:
    kwargs = {"num_classes": 1000, "transform_input": False}
    torch.manual_seed(0)  # the same "untrained" model every time, so results are reproducible
    model = inception_v3(weights=None, num_classes=1000, aux_logits=False, init_weights=True)
    return LoadedModel(model, "inception_v3", kwargs, imagenet_class_names(), GUIDE_EVAL, "none",
                       False, "untrained (random init)", state_fingerprint(model.state_dict()))


def _load_from_checkpoint(path: Path) -> LoadedModel:
    data = load_checkpoint(path)
    kwargs = dict(data["arch_kwargs"])
    state = _strip_prefixes(data["model"])
    _check_state_fits(path.name, data["arch"], kwargs, state)
    model = build_model(data["arch"], **kwargs)
    if data["arch"] == "inception_v3":
        drop_aux_head(model)
    model.load_state_dict(state)
    default = CIFAR_EVAL if data["arch"] == "cifar_net" else GUIDE_EVAL
    preset = EvalPreset.from_dict(data["preset"]) if data.get("preset") else default
    label = f"checkpoint {path.name}"
    if data.get("job_id"):
        label += f" (job {data['job_id']}, epoch {data.get('epoch', '?')})"
    names = data.get("display_names") or data["class_names"]  # readable labels when the data had them
    return LoadedModel(model, data["arch"], kwargs, tuple(names), preset, str(path),
                       True, label, state_fingerprint(data["model"]))


def _check_state_fits(name: str, arch: str, kwargs: dict[str, Any], state: dict[str, torch.Tensor]) -> None:
    """CheckpointError unless `state` has exactly the tensors, and shapes, that `arch` with `kwargs` needs.
    The model is built on the meta device: no memory, so a bad file fails before anything is allocated."""
    if arch not in ARCHITECTURES:
        raise CheckpointError(f"{name}: unknown architecture {arch!r}; dlguide knows {', '.join(ARCHITECTURES)}")
    try:
        with torch.device("meta"):
            wanted = drop_aux_head(build_model(arch, **kwargs)).state_dict()
    except (TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{name}: arch_kwargs do not build {arch} ({str(exc)[:200]})") from None
    missing = sorted(set(wanted) - set(state))
    unexpected = sorted(set(state) - set(wanted))
    if missing or unexpected:
        what = f"lacks {missing[0]}" if missing else f"has an unexpected tensor {unexpected[0]}"
        raise CheckpointError(f"{name}: the state dict does not match {arch} ({what}; "
                              f"{len(missing)} missing, {len(unexpected)} unexpected)")
    for key, tensor in wanted.items():
        if tuple(state[key].shape) != tuple(tensor.shape):
            raise CheckpointError(f"{name}: {key} has shape {tuple(state[key].shape)} but {arch} with "
                                  f"{kwargs.get('num_classes', '?')} classes needs {tuple(tensor.shape)}")


def _strip_prefixes(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # DDP ("module.") and torch.compile ("_orig_mod.") wrap names; the bare model wants neither.
    out = {}
    for key, value in state.items():
        for prefix in ("module.", "_orig_mod."):
            if key.startswith(prefix):
                key = key[len(prefix):]
        if not key.startswith("AuxLogits."):
            out[key] = value
    return out


def state_fingerprint(state: dict[str, torch.Tensor]) -> str:
    """A short stable hash of a state dict's names, shapes and bytes."""
    sha = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        sha.update(key.encode())
        sha.update(str(tuple(tensor.shape)).encode())
        sha.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return sha.hexdigest()[:16]


def job_checkpoints() -> list[Path]:
    """Checkpoints written by training jobs (DLGUIDE_HOME/jobs/<id>/*.pt), newest first."""
    from dlguide_core.settings import home

    found = [p for p in (home() / "jobs").glob("*/*.pt") if p.is_file()]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def available_weights() -> list[str]:
    """Every weights source a user can pick: imagenet, none, then job checkpoints."""
    return [*WEIGHT_CHOICES, *(str(p) for p in job_checkpoints())]
