"""Weight sources resolved into ready models (the architectures themselves are `architectures.py`'s).

Weight sources (the `--weights` argument everywhere):
- "imagenet": torchvision's ImageNet weights of the default architecture (Inception v3, IMAGENET1K_V1) from
  the TORCH_HOME cache, downloaded with progress when online; offline, WeightsUnavailable names the file.
  `ARCH:imagenet` names another architecture's (architectures.parse_source).
- "none" (or `ARCH:none`): random init, always labelled untrained.
- a path: a checkpoint written by dlguide training (see checkpoints.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dlguide_core.downloads import DownloadFailed, ProgressFn, download_file
from dlguide_core.errors import CheckpointError, WeightsUnavailable
from dlguide_core.vision import architectures
from dlguide_core.vision.architectures import Architecture, UnknownArchitecture
from dlguide_core.vision.checkpoints import load_checkpoint
from dlguide_core.vision.presets import EvalPreset

# The default architecture's (Inception v3's) ImageNet weights, as the names dlguide has always exported.
IMAGENET_FILENAME = architectures.DEFAULT.imagenet.filename if architectures.DEFAULT.imagenet else ""
WEIGHT_CHOICES = (architectures.IMAGENET, architectures.UNTRAINED)
CIFAR10_CLASSES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def build_model(arch: str, **kwargs: Any) -> nn.Module:
    """The registered architecture `arch` built from its arch_kwargs (ValueError for an unknown name)."""
    return architectures.architecture(arch).build(**kwargs)


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


def _imagenet_of(spec: Architecture | None) -> tuple[Architecture, architectures.ImageNetWeights]:
    spec = spec or architectures.DEFAULT
    if spec.imagenet is None:
        raise WeightsUnavailable(spec.imagenet_problem())
    return spec, spec.imagenet


def imagenet_weights_path(spec: Architecture | None = None) -> Path:
    """Where the ImageNet weights of `spec` (the default architecture's by default) are cached."""
    return Path(torch.hub.get_dir()) / "checkpoints" / _imagenet_of(spec)[1].filename


def imagenet_class_names(spec: Architecture | None = None) -> tuple[str, ...]:
    return _imagenet_of(spec)[1].class_names()


def fetch_imagenet_weights(progress: ProgressFn | None = None, spec: Architecture | None = None) -> Path:
    """The cached ImageNet weights file of `spec`, downloading it (checksum-verified) if missing."""
    spec, weights = _imagenet_of(spec)
    path = imagenet_weights_path(spec)
    if path.is_file():
        return path
    try:
        return download_file(weights.url, path, progress=progress, sha256_prefix=weights.sha256_prefix)
    except DownloadFailed as exc:
        raise WeightsUnavailable(
            f"ImageNet weights {weights.filename} are not cached and could not be downloaded ({exc}). "
            f"Download {weights.url} on a machine with internet and {where_to_put(path)}"
        ) from None


def where_to_put(path: Path) -> str:
    """How a user puts a weights file at `path`: copy it there, or, in dlguide's image (an `OFFLINE=1` build),
    mount the folder holding it there, read-only."""
    import os

    if os.environ.get("DLGUIDE_CONTAINER") == "1":
        return (f"mount the folder that holds it into the container, read-only: "
                f"`docker run -v /path/to/checkpoints:{path.parent}:ro ...` (README, Docker).")
    return f"copy it to {path} (or set TORCH_HOME to the folder that holds checkpoints/)."


def load_model(weights: str = architectures.IMAGENET, *, device: str | torch.device | None = None,
               progress: ProgressFn | None = None) -> LoadedModel:
    """Resolve a weights source into an eval-mode LoadedModel on `device` (best available by default)."""
    named = architectures.parse_source(weights)
    if named is None:
        loaded = _load_from_checkpoint(Path(weights))
    elif named[1] == architectures.IMAGENET:
        loaded = _load_imagenet(named[0], progress)
    else:
        loaded = _load_untrained(named[0])
    from dlguide_core.devices import best_device

    target = torch.device(device) if device is not None else best_device()
    loaded.model.to(target).eval()
    if target.type == "cpu":
        # oneDNN's convolutions run ~20% faster on NHWC here (docs/BENCHMARKS.md, issue 2);
        # inputs follow in classify.predict_logits. GPUs keep the layout their kernels prefer.
        loaded.model.to(memory_format=torch.channels_last)
    return loaded


def _load_imagenet(spec: Architecture, progress: ProgressFn | None) -> LoadedModel:
    spec, weights = _imagenet_of(spec)
    path = fetch_imagenet_weights(progress, spec)
    state = _strip_prefixes(torch.load(path, map_location="cpu", weights_only=True), spec.ignored_keys)
    kwargs = {"num_classes": 1000, **weights.arch_kwargs}
    model = spec.build(**kwargs)
    model.load_state_dict(state)
    source = spec.source(architectures.IMAGENET)
    return LoadedModel(model, spec.name, kwargs, weights.class_names(), weights.preset, source,
                       True, f"ImageNet (torchvision {weights.tag})", state_fingerprint(model.state_dict()))


def _load_untrained(spec: Architecture) -> LoadedModel:
    kwargs = {"num_classes": 1000, **spec.untrained_kwargs}
    torch.manual_seed(0)  # the same "untrained" model every time, so results are reproducible
    model = spec.build(**kwargs)
    names = spec.imagenet.class_names() if spec.imagenet else tuple(f"class {i}" for i in range(1000))
    return LoadedModel(model, spec.name, kwargs, names, spec.eval_preset, spec.source(architectures.UNTRAINED),
                       False, "untrained (random init)", state_fingerprint(model.state_dict()))


def _load_from_checkpoint(path: Path) -> LoadedModel:
    data = load_checkpoint(path)
    kwargs = dict(data["arch_kwargs"])
    spec = _checkpoint_architecture(path.name, data["arch"])
    state = _strip_prefixes(data["model"], spec.ignored_keys)
    _check_state_fits(path.name, spec, kwargs, state)
    model = spec.build(**kwargs)
    model.load_state_dict(state)
    preset = EvalPreset.from_dict(data["preset"]) if data.get("preset") else spec.eval_preset
    label = f"checkpoint {path.name}"
    if data.get("job_id"):
        label += f" (job {data['job_id']}, {epoch_words(data.get('epoch'), data.get('batch'))})"
    names = data.get("display_names") or data["class_names"]  # readable labels when the data had them
    return LoadedModel(model, spec.name, kwargs, tuple(names), preset, str(path),
                       True, label, state_fingerprint(data["model"]))


def epoch_words(epoch: object, batch: object) -> str:
    """Where a checkpoint's run stood, with epochs counted from 1 as the Train page and `jobs show` count them: a
    checkpoint keeps the epoch it would resume (0 = the first) and the batch in it (issue 43: "epoch 1" named the
    second epoch of a run stopped in it, which every table calls 2)."""
    if not isinstance(epoch, int):
        return "epoch ?"
    if isinstance(batch, int) and batch > 0:
        return f"in epoch {epoch + 1}"
    return f"after epoch {epoch}" if epoch > 0 else "before epoch 1"


def _checkpoint_architecture(name: str, arch: str) -> Architecture:
    try:
        return architectures.architecture(arch)
    except UnknownArchitecture as exc:
        raise CheckpointError(f"{name}: {exc}") from None


def _check_state_fits(name: str, spec: Architecture, kwargs: dict[str, Any], state: dict[str, torch.Tensor]) -> None:
    """CheckpointError unless `state` has exactly the tensors, and shapes, that `spec` with `kwargs` needs.
    The model is built on the meta device: no memory, so a bad file fails before anything is allocated."""
    arch = spec.name
    try:
        with torch.device("meta"):
            wanted = spec.build(**kwargs).state_dict()
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


def _strip_prefixes(state: dict[str, torch.Tensor], ignored: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    """DDP ("module.") and torch.compile ("_orig_mod.") wrap names; the bare model wants neither. Tensors under
    `ignored` (the architecture's training-only heads) are left out."""
    out = {}
    for key, value in state.items():
        for prefix in ("module.", "_orig_mod."):
            if key.startswith(prefix):
                key = key[len(prefix):]
        if not (ignored and key.startswith(ignored)):
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


def taught_dir() -> Path:
    """Where the Classify page saves the checkpoints it taught (issue 44): DLGUIDE_HOME/taught."""
    from dlguide_core.settings import home

    return home() / "taught"


def taught_checkpoints() -> list[Path]:
    """Checkpoints saved by the Classify page's Teach flow (taught_dir()/*.pt), newest first."""
    found = [p for p in taught_dir().glob("*.pt") if p.is_file()]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def available_weights() -> list[str]:
    """Every weights source a user can pick: imagenet, none, the other architectures' ImageNet weights
    (architectures.named_sources), then job checkpoints, then the checkpoints the Classify page taught."""
    return [*architectures.named_sources(), *(str(p) for p in [*job_checkpoints(), *taught_checkpoints()])]
