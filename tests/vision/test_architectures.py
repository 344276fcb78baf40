"""The architecture registry: every entry builds, takes its smallest input, swaps its head, names a real Grad-CAM
block, and its ImageNet weights' file is the one torchvision's enum points at."""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import urlparse

import pytest
import torch

from dlguide_core.vision import architectures
from dlguide_core.vision.architectures import UnknownArchitecture


@pytest.mark.parametrize("spec", architectures.architectures(), ids=architectures.names())
def test_every_entry_builds_runs_at_its_smallest_size_and_swaps_its_head(spec):
    torch.manual_seed(0)
    model = spec.build(**{**spec.untrained_kwargs, "num_classes": 5}).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, spec.min_size, spec.min_size)).shape == (1, 5)
    spec.replace_head(model, 3)
    with torch.no_grad():
        assert model(torch.randn(1, 3, spec.min_size, spec.min_size)).shape == (1, 3)
    assert spec.gradcam_layer is None or isinstance(model.get_submodule(spec.gradcam_layer), torch.nn.Module)
    train, val = spec.train_presets(spec.default_size)
    assert train.crop == val.crop == spec.default_size and spec.size_problem(spec.default_size) is None
    assert spec.size_problem(spec.min_size - 1) is not None


@pytest.mark.parametrize("spec", architectures.with_imagenet(), ids=lambda s: s.name)
def test_imagenet_file_is_the_one_torchvision_names(spec):
    weights = spec.imagenet
    assert PurePosixPath(urlparse(weights.url).path).name == weights.filename
    assert len(weights.class_names()) == 1000 and len(weights.sha256_prefix) == 8


def test_weights_sources_name_an_architecture_or_a_path():
    default = architectures.DEFAULT
    assert architectures.parse_source("imagenet") == (default, "imagenet")
    assert architectures.parse_source("none") == (default, "none")
    assert architectures.parse_source(f"{default.name}:imagenet") == (default, "imagenet")
    assert architectures.parse_source("nosuch:imagenet") is None  # a checkpoint path, as any other string
    assert architectures.parse_source("/tmp/ck.pt") is None
    assert architectures.named_sources()[:2] == ("imagenet", "none")
    assert all(architectures.source_label(s) for s in architectures.named_sources())


def test_unknown_architecture_is_one_line_with_the_choices():
    with pytest.raises(UnknownArchitecture) as info:
        architectures.architecture("vgg16")
    assert "vgg16" in str(info.value) and architectures.DEFAULT.name in str(info.value)
    assert "\n" not in str(info.value)


def test_an_architecture_without_imagenet_weights_says_which_have_them():
    without = [s for s in architectures.architectures() if s.imagenet is None]
    assert without, "the registry has an architecture trained from scratch only"
    problem = without[0].imagenet_problem()
    assert problem and all(s.name in problem for s in architectures.with_imagenet())
