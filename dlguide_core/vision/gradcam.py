"""Grad-CAM: where in the image the model looked when it picked a class.

Selvaraju et al. (2017): weight each channel of a late convolutional block by the
mean gradient of the class score over that channel, sum the weighted channels,
ReLU, upsample to the input size. The block is the architecture's `gradcam_layer`
(architectures.py): for Inception v3 `Mixed_7c`, the last one before global pooling,
(B, 2048, 8, 8) at 299 px.

The model is usually the app's cached LoadedModel, shared by every session, so
this module never changes it: the forward hook lives for one call only (removed
in `finally`) and acts only in the calling thread (other sessions may push their
own forwards through the same module meanwhile); requires_grad flags and
train/eval mode are never touched. The forward runs under no_grad up to the
layer, then the hook swaps in a detached leaf and turns grad on (grad mode is
thread-local) so only the last block, pooling and fc are recorded.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from dlguide_core.vision.architectures import architecture
from dlguide_core.vision.classify import forward_slot
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import GUIDE_EVAL, EvalPreset, denormalize, preprocess


@dataclass(frozen=True)
class GradCam:
    """The heatmap for one image and class, with the images to show it on."""

    heatmap: np.ndarray = field(repr=False, compare=False)  # (crop, crop) float32 in [0, 1]
    overlay: Image.Image = field(repr=False, compare=False)  # model_view with the heatmap blended in
    model_view: Image.Image = field(repr=False, compare=False)  # the crop the model saw, denormalised
    class_index: int
    label: str
    prob: float


def grad_cam(loaded: LoadedModel, image: Image.Image, *, class_index: int | None = None,
             layer: str | None = None, alpha: float = 0.45) -> GradCam:
    """Grad-CAM of `class_index` (default: the top class) for one RGB image, at `layer` (default: the
    architecture's Grad-CAM block)."""
    layer = layer or architecture(loaded.arch).gradcam_layer
    if layer is None:
        raise ValueError(f"{loaded.arch} names no Grad-CAM layer")
    batch = preprocess([image], loaded.preset)  # (1, 3, crop, crop)
    with forward_slot():  # the forward and its backward hold activations: one of the process's live forwards
        acts, logits = forward_with_leaf(loaded.model, batch.to(loaded.device), layer)
        probs = torch.softmax(logits.detach().float(), dim=1)[0]
        index = int(probs.argmax()) if class_index is None else int(class_index)
        with torch.enable_grad():  # indexing the score must be recorded even under a caller's no_grad
            (grads,) = torch.autograd.grad(logits[0, index], acts)  # (1, C, h, w); no .grad written anywhere
        del logits
    heatmap = cam_from(acts.detach(), grads, size=tuple(batch.shape[-2:]))
    view = model_view(batch, loaded.preset)
    return GradCam(heatmap, overlay_heatmap(view, heatmap, alpha), view, index,
                   loaded.class_names[index], float(probs[index]))


def forward_with_leaf(model: nn.Module, batch: torch.Tensor, layer: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Run `model` on `batch`; return (`layer`'s output as a grad-requiring leaf, logits that depend on it)."""
    module = model.get_submodule(layer)
    owner = threading.get_ident()
    captured: dict[str, torch.Tensor] = {}

    def hook(_module: nn.Module, _inputs: tuple, output: torch.Tensor) -> torch.Tensor | None:
        if threading.get_ident() != owner or captured:
            return None  # another session's forward through the shared model: leave it alone
        captured["acts"] = output.detach().requires_grad_(True)
        torch.set_grad_enabled(True)  # record from here on; no_grad's exit restores the caller's mode
        return captured["acts"]

    handle = module.register_forward_hook(hook)
    try:
        with torch.no_grad():
            logits = model(batch)
    finally:
        handle.remove()
    if "acts" not in captured:
        raise RuntimeError(f"layer {layer} was not reached by the forward pass")
    return captured["acts"], logits


def cam_from(acts: torch.Tensor, grads: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
    """(1, C, h, w) activations and gradients -> (H, W) heatmap in [0, 1] (all zeros when nothing is positive)."""
    weights = grads.mean(dim=(2, 3), keepdim=True)  # (1, C, 1, 1): how much each channel matters
    cam = torch.relu((weights * acts).sum(dim=1, keepdim=True))  # (1, 1, h, w)
    cam = F.interpolate(cam.float(), size=size, mode="bilinear", align_corners=False)[0, 0]
    peak = float(cam.max())
    cam = cam / peak if peak > 0 else torch.zeros_like(cam)
    return cam.clamp(0, 1).cpu().numpy().astype(np.float32)


def model_view(batch: torch.Tensor, preset: EvalPreset = GUIDE_EVAL) -> Image.Image:
    """The first image of a preprocessed batch as the model sees it (crop, denormalised) as RGB."""
    pixels = denormalize(batch[:1].detach().cpu().float(), preset)[0]  # (3, H, W) in [0, 1]
    array = (pixels.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
    return Image.fromarray(array, mode="RGB")


def jet(values: np.ndarray) -> np.ndarray:
    """(H, W) in [0, 1] -> (H, W, 3) float RGB in [0, 1]: blue (cold) to red (hot)."""
    v = np.clip(values, 0, 1)[..., None]
    centres = np.array([3.0, 2.0, 1.0])  # r, g, b peaks along 4 * v
    return np.clip(1.5 - np.abs(4 * v - centres), 0, 1)


def overlay_heatmap(image: Image.Image, heatmap: np.ndarray, alpha: float = 0.45) -> Image.Image:
    """Blend the jet-coloured heatmap over `image` (resized to the heatmap's size)."""
    height, width = heatmap.shape
    base = np.asarray(image.convert("RGB").resize((width, height)), dtype=np.float32) / 255
    mixed = (1 - alpha) * base + alpha * jet(heatmap)
    return Image.fromarray((mixed * 255).round().astype(np.uint8), mode="RGB")
