import pytest
import torch
from torchvision import transforms

from dlguide_core.vision.images import load_image
from dlguide_core.vision.presets import CIFAR_EVAL, GUIDE_EVAL, EvalPreset, denormalize, preprocess


def guide_transform():
    """Verbatim the guide's 'Evaluating a Pretrained Model' preprocessing."""
    return transforms.Compose([
        transforms.Resize(299),
        transforms.CenterCrop(299),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])


def test_preprocess_equals_the_guides_compose(sample_jpeg):
    img = load_image(sample_jpeg)
    ours = preprocess([img], GUIDE_EVAL)
    theirs = guide_transform()(img).unsqueeze(0)
    assert ours.shape == (1, 3, 299, 299)
    assert (ours - theirs).abs().max().item() <= 1e-6


def test_preset_round_trips_through_a_dict():
    for preset in (GUIDE_EVAL, CIFAR_EVAL, EvalPreset(resize=342, crop=299)):
        assert EvalPreset.from_dict(preset.to_dict()) == preset


def test_preset_rejects_nonsense():
    with pytest.raises(ValueError, match="interpolation must be one of"):
        EvalPreset(interpolation="lanczos9")
    with pytest.raises(ValueError, match="cannot exceed"):
        EvalPreset(resize=100, crop=299)


def test_denormalize_inverts_normalisation(sample_jpeg):
    img = load_image(sample_jpeg)
    batch = preprocess([img], CIFAR_EVAL)
    plain = transforms.Compose([transforms.Resize(32), transforms.CenterCrop(32), transforms.ToTensor()])(img)
    assert torch.allclose(denormalize(batch, CIFAR_EVAL)[0], plain, atol=1e-6)
