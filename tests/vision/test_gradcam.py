"""Grad-CAM on Inception v3's Mixed_7c: shape, range, localisation, and no mutation of a shared model."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from dlguide_core.vision.architectures import INCEPTION_V3
from dlguide_core.vision.classify import classify_images
from dlguide_core.vision.gradcam import cam_from, forward_with_leaf, grad_cam, jet, overlay_heatmap
from dlguide_core.vision.models import LoadedModel, build_model
from dlguide_core.vision.presets import GUIDE_EVAL, EvalPreset, preprocess

GREY = (128, 128, 128)
SMALL = EvalPreset(resize=160, crop=160)  # Mixed_7c is 3x3 here: enough for shape checks, 3x faster


def scene(x0: int, y0: int, size: int = 299, radius: int = 90) -> Image.Image:
    """A red disc on grey: the synthetic object whose position the heatmap must follow."""
    img = Image.new("RGB", (size, size), GREY)
    ImageDraw.Draw(img).ellipse([x0, y0, x0 + radius, y0 + radius], fill=(250, 30, 30))
    return img


def pooled_features(model: torch.nn.Module, img: Image.Image) -> torch.Tensor:
    acts, _ = forward_with_leaf(model, preprocess([img]), INCEPTION_V3.gradcam_layer)
    return acts.detach().mean(dim=(0, 2, 3))  # (2048,)


@pytest.fixture(scope="module")
def disc_model() -> LoadedModel:
    """Random Inception v3 whose class 0 is a "red disc" detector built from a centred disc.

    fc row 0 is the direction from a blank image's pooled Mixed_7c features to a centred
    disc's, so class 0's score grows with disc-like features wherever they are; the tests
    then move the disc to the corners, positions the detector was never built from.
    """
    torch.manual_seed(0)
    model = build_model("inception_v3", num_classes=2).eval()
    direction = pooled_features(model, scene(105, 105)) - pooled_features(model, Image.new("RGB", (299, 299), GREY))
    with torch.no_grad():
        model.fc.weight.zero_()
        model.fc.bias.zero_()
        model.fc.weight[0] = direction / direction.norm()
    return LoadedModel(model, "inception_v3", {"num_classes": 2}, ("disc", "other"), GUIDE_EVAL, "test",
                       False, "test disc detector", "test")


def small_model() -> LoadedModel:
    torch.manual_seed(1)
    model = build_model("inception_v3", num_classes=3).eval()
    return LoadedModel(model, "inception_v3", {"num_classes": 3}, ("a", "b", "c"), SMALL, "test", False, "t", "t")


def quadrant(heatmap: np.ndarray) -> tuple[bool, bool]:
    row, col = np.unravel_index(int(heatmap.argmax()), heatmap.shape)
    return bool(row >= heatmap.shape[0] / 2), bool(col >= heatmap.shape[1] / 2)


def test_heatmap_shape_range_and_images() -> None:
    loaded = small_model()
    result = grad_cam(loaded, Image.new("RGB", (240, 200), (10, 200, 90)))
    assert result.heatmap.shape == (160, 160)
    assert result.heatmap.dtype == np.float32
    assert 0.0 <= float(result.heatmap.min()) and float(result.heatmap.max()) <= 1.0
    assert result.overlay.size == result.model_view.size == (160, 160)
    assert result.overlay.mode == "RGB"
    assert 0.0 < result.prob <= 1.0 and result.label in loaded.class_names
    top = classify_images(loaded, [Image.new("RGB", (240, 200), (10, 200, 90))], k=1)[0][0]
    assert result.class_index == top.index  # default class is the top prediction


@pytest.mark.parametrize("corner", [(10, 10), (200, 200), (10, 200), (200, 10)])
def test_heatmap_follows_the_object(disc_model: LoadedModel, corner: tuple[int, int]) -> None:
    result = grad_cam(disc_model, scene(*corner), class_index=0)
    x0, y0 = corner
    assert quadrant(result.heatmap) == (y0 > 150, x0 > 150)
    rows, cols = np.mgrid[0:299, 0:299]
    centre_row = float((result.heatmap * rows).sum() / result.heatmap.sum())
    centre_col = float((result.heatmap * cols).sum() / result.heatmap.sum())
    assert (centre_row > 149.5) == (y0 > 150) and (centre_col > 149.5) == (x0 > 150)


def test_shared_model_is_left_untouched(disc_model: LoadedModel) -> None:
    model = disc_model.model
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    list(model.parameters())[-1].requires_grad_(False)  # a mix of flags must survive as is
    flags[list(flags)[-1]] = False
    before = {k: v.clone() for k, v in model.state_dict().items()}
    grad_cam(disc_model, scene(10, 10))
    assert not model.training
    assert all(not m._forward_hooks and not m._backward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert {name: p.requires_grad for name, p in model.named_parameters()} == flags
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.is_grad_enabled()  # the caller's grad mode is restored
    list(model.parameters())[-1].requires_grad_(True)


def test_grad_cam_runs_under_a_callers_no_grad() -> None:
    loaded = small_model()
    with torch.no_grad():
        result = grad_cam(loaded, Image.new("RGB", (160, 160), (200, 20, 20)))
        assert not torch.is_grad_enabled()
    assert result.heatmap.shape == (160, 160)


def test_concurrent_sessions_do_not_interfere() -> None:
    """Grad-CAM and plain classification from several threads on one model match the sequential results."""
    loaded = small_model()
    images = [Image.new("RGB", (160, 160), colour) for colour in [(250, 0, 0), (0, 250, 0), (0, 0, 250)]]
    expected = [grad_cam(loaded, img).heatmap for img in images]
    expected_top = classify_images(loaded, images, k=3)
    got: dict[int, np.ndarray] = {}
    tops: list = []
    errors: list[BaseException] = []

    def cam_worker(i: int) -> None:
        try:
            for _ in range(2):
                got[i] = grad_cam(loaded, images[i]).heatmap
        except BaseException as exc:  # surfaced by the assert below
            errors.append(exc)

    def classify_worker() -> None:
        try:
            for _ in range(3):
                tops.append(classify_images(loaded, images, k=3))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=cam_worker, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=classify_worker))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    for i, heatmap in enumerate(expected):
        np.testing.assert_allclose(got[i], heatmap, atol=1e-4)
    for run in tops:
        assert [[p.index for p in row] for row in run] == [[p.index for p in row] for row in expected_top]
    assert all(not m._forward_hooks for m in loaded.model.modules())


def test_hook_is_removed_when_the_layer_is_missing() -> None:
    loaded = small_model()
    with pytest.raises(AttributeError):
        grad_cam(loaded, Image.new("RGB", (160, 160)), layer="NoSuchLayer")
    assert all(not m._forward_hooks for m in loaded.model.modules())


def test_cam_is_zero_when_nothing_is_positive() -> None:
    acts = torch.ones(1, 4, 2, 2)
    heatmap = cam_from(acts, -torch.ones(1, 4, 2, 2), size=(8, 8))
    assert heatmap.shape == (8, 8) and float(np.abs(heatmap).max()) == 0.0
    heatmap = cam_from(torch.tensor([[[[0.0, 1.0], [0.0, 0.0]]]]), torch.ones(1, 1, 2, 2), size=(2, 2))
    assert heatmap[0, 1] == pytest.approx(1.0) and heatmap[1, 0] == pytest.approx(0.0)


def test_jet_and_overlay() -> None:
    colours = jet(np.array([[0.0, 1.0]]))
    assert colours[0, 0, 2] > colours[0, 0, 0]  # cold is blue
    assert colours[0, 1, 0] > colours[0, 1, 2]  # hot is red
    base = Image.new("RGB", (40, 40), (0, 0, 0))
    heat = np.zeros((20, 20), dtype=np.float32)
    heat[:, 10:] = 1.0
    out = np.asarray(overlay_heatmap(base, heat, alpha=0.5))
    assert out.shape == (20, 20, 3)
    assert out[0, 15, 0] > out[0, 5, 0] and out[0, 5, 2] > out[0, 15, 2]
