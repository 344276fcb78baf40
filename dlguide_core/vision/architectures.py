"""The architecture registry: every image-classification architecture dlguide trains, classifies with, exports
and serves, each declared once as a frozen `Architecture` (in the spirit of timm's per-model configs).

An entry says how to build the model from its `arch_kwargs` (the checkpoint field), which layer is its head
(replaced by a fresh `nn.Linear` for another class count), the presets its recipe trains and validates with at
an image size, the smallest size it takes, the preset a checkpoint without one is read with, its ImageNet
weights if torchvision has them (the enum, the file in TORCH_HOME/hub/checkpoints, the kwargs and preset they
need) and the block Grad-CAM looks at. Nothing outside this module branches on an architecture's name: it asks
`architecture(name)`.

Weights sources (the `--weights` argument of classify, evaluate, export and bench): "imagenet" and "none" are
the default architecture's (Inception v3, the guide's); `ARCH:imagenet` and `ARCH:none` name another one's.
Anything else is a checkpoint path.

Importing this module imports neither torch nor torchvision (the CLI's light commands read it); builders and
the weights enums load them when called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from dlguide_core.errors import DlguideError
from dlguide_core.vision import presets
from dlguide_core.vision.presets import EvalPreset, TrainPreset

if TYPE_CHECKING:
    from torch import nn

IMAGENET = "imagenet"  # a weights source: the architecture's ImageNet weights
UNTRAINED = "none"  # a weights source: random init, labelled untrained


class UnknownArchitecture(DlguideError, ValueError):
    """A name no entry of the registry has."""


@dataclass(frozen=True)
class ImageNetWeights:
    """torchvision's ImageNet weights of an architecture, fetched into the torch.hub cache by dlguide itself."""

    enum: str  # "Inception_V3_Weights.IMAGENET1K_V1": torchvision.models.get_weight's name
    filename: str  # the file in TORCH_HOME/hub/checkpoints; its hash part is the sha256 prefix (torch.hub's rule)
    megabytes: int  # the download's size, said before it starts
    preset: EvalPreset  # what the weights were evaluated with
    arch_kwargs: Mapping[str, Any] = field(default_factory=dict)  # beyond num_classes=1000

    @property
    def sha256_prefix(self) -> str:
        return self.filename.rsplit(".", 1)[0].rsplit("-", 1)[-1]

    @property
    def tag(self) -> str:
        return self.enum.rsplit(".", 1)[-1]  # IMAGENET1K_V1

    def torchvision_weights(self) -> Any:
        from dlguide_core.torchvision_lib import models

        return models.get_weight(self.enum)

    @property
    def url(self) -> str:
        return self.torchvision_weights().url

    def class_names(self) -> tuple[str, ...]:
        return tuple(self.torchvision_weights().meta["categories"])


@dataclass(frozen=True, eq=False)  # an entry is itself: compared (and hashed) by identity
class Architecture:
    """One architecture, everything dlguide needs to know about it; the registry holds one per name."""

    name: str  # the checkpoint's `arch`, the recipe's name, the cache files' prefix
    title: str  # what people read
    builder: Callable[..., nn.Module]  # arch_kwargs -> the model, inference-ready (no training-only heads)
    head: str  # the classifier layer: an nn.Linear, replaced for a new class count
    min_size: int  # the smallest square input it takes
    default_size: int  # its recipe's image size
    train_presets: Callable[[int], tuple[TrainPreset, EvalPreset]]  # image size -> (train, val) presets
    eval_preset: EvalPreset  # a checkpoint without a preset, and the untrained model, use this
    imagenet: ImageNetWeights | None = None
    untrained_kwargs: Mapping[str, Any] = field(default_factory=dict)  # the `none` weights source's model
    gradcam_layer: str | None = None  # the last convolutional block, where Grad-CAM looks
    ignored_keys: tuple[str, ...] = ()  # state-dict prefixes of training-only heads a file may hold (never built)
    fixed_size: bool = False  # built for `default_size` only (a flatten of a fixed feature map)
    lead_for: tuple[str, ...] = ()  # dataset kinds (image_folders.DatasetInfo.kind) it is the guide's pick for

    def build(self, **arch_kwargs: Any) -> nn.Module:
        return self.builder(**arch_kwargs)

    def replace_head(self, model: nn.Module, num_classes: int) -> None:
        """Give `model` a fresh head of `num_classes` outputs (fine-tuning), unless it has that many already."""
        from torch import nn

        owner_name, _, attr = self.head.rpartition(".")
        owner = model.get_submodule(owner_name) if owner_name else model
        old = getattr(owner, attr)
        if old.out_features != num_classes:
            setattr(owner, attr, nn.Linear(old.in_features, num_classes))

    def size_problem(self, image_size: int) -> str | None:
        """Why `image_size` cannot train this architecture, or None."""
        if self.fixed_size and image_size != self.default_size:
            return f"{self.name} is built for {self.default_size}x{self.default_size} images"
        if image_size < self.min_size:
            return f"{self.title} needs an image size of at least {self.min_size}"
        return None

    def imagenet_problem(self) -> str | None:
        """Why this architecture has no ImageNet weights to start from, or None."""
        if self.imagenet is not None:
            return None
        have = ", ".join(spec.name for spec in with_imagenet())
        return f"imagenet weights exist only for {have}, not {self.name}; use none"

    def source(self, kind: str) -> str:
        """The weights-source string of this architecture's `imagenet` or `none` weights."""
        return kind if self is DEFAULT else f"{self.name}:{kind}"


def _build_inception(num_classes: int = 1000, transform_input: bool = False, **_: Any) -> nn.Module:
    from dlguide_core.torchvision_lib import models

    # init_weights=False: the weights come from a file or are trained; the aux head is for training from
    # scratch only (torchvision drops it at eval too), so it is never built.
    return models.inception_v3(weights=None, num_classes=num_classes, aux_logits=False,
                        transform_input=transform_input, init_weights=False)


def _build_cifar_net(num_classes: int = 10, **_: Any) -> nn.Module:
    from dlguide_core.vision.small_cnn import CifarNet

    return CifarNet(num_classes)


def _build_resnet50(num_classes: int = 1000, **_: Any) -> nn.Module:
    from dlguide_core.torchvision_lib import models

    return models.resnet50(weights=None, num_classes=num_classes)


def _fixed(train: TrainPreset, val: EvalPreset) -> Callable[[int], tuple[TrainPreset, EvalPreset]]:
    return lambda _size: (train, val)


def _scaled(reference: EvalPreset) -> Callable[[int], tuple[TrainPreset, EvalPreset]]:
    return lambda size: presets.scaled_presets(size, reference)


INCEPTION_V3 = Architecture(
    name="inception_v3", title="Inception v3", builder=_build_inception, head="fc",
    min_size=75, default_size=299,  # torchvision's meta min_size: smaller inputs pool to nothing
    # the torchvision reference recipe validates at Resize 342 / CenterCrop 299
    train_presets=_scaled(EvalPreset(resize=342, crop=299)), eval_preset=presets.GUIDE_EVAL,
    imagenet=ImageNetWeights("Inception_V3_Weights.IMAGENET1K_V1", "inception_v3_google-0cc3c7bd.pth", 104,
                             presets.GUIDE_EVAL, MappingProxyType({"transform_input": True})),  # [-1, 1] inputs
    ignored_keys=("AuxLogits.",),
    untrained_kwargs=MappingProxyType({"transform_input": False}),
    gradcam_layer="Mixed_7c", lead_for=("tiny-imagenet-unprepared", "imagefolder"),
)
CIFAR_NET = Architecture(
    name="cifar_net", title="the guide's CIFAR-10 CNN", builder=_build_cifar_net, head="fc3",
    min_size=32, default_size=32, fixed_size=True,
    train_presets=_fixed(presets.CIFAR_TRAIN, presets.CIFAR_EVAL), eval_preset=presets.CIFAR_EVAL,
    gradcam_layer="conv2", lead_for=("cifar10",),
)
RESNET50_EVAL = EvalPreset(resize=232, crop=224)  # IMAGENET1K_V2's evaluation transform (torchvision)
RESNET50 = Architecture(
    name="resnet50", title="ResNet-50", builder=_build_resnet50, head="fc",
    min_size=64, default_size=224,  # 64: layer4's map is 2x2 there, the least Grad-CAM can place anything on
    train_presets=_scaled(RESNET50_EVAL), eval_preset=RESNET50_EVAL,
    imagenet=ImageNetWeights("ResNet50_Weights.IMAGENET1K_V2", "resnet50-11ad3fa6.pth", 98, RESNET50_EVAL),
    gradcam_layer="layer4",
)

DEFAULT = INCEPTION_V3  # the architecture of the `imagenet` and `none` weights sources (the guide's)
_REGISTRY: dict[str, Architecture] = {spec.name: spec for spec in (INCEPTION_V3, CIFAR_NET, RESNET50)}


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def architectures() -> tuple[Architecture, ...]:
    return tuple(_REGISTRY.values())


def architecture(name: str) -> Architecture:
    """The registered architecture called `name`; UnknownArchitecture (one line, the choices) otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownArchitecture(f"unknown architecture {name!r}; dlguide knows {', '.join(_REGISTRY)}") from None


def with_imagenet() -> tuple[Architecture, ...]:
    return tuple(spec for spec in _REGISTRY.values() if spec.imagenet is not None)


def for_dataset(kind: str) -> Architecture | None:
    """The architecture the guide pairs with a dataset kind, if any."""
    return next((spec for spec in _REGISTRY.values() if kind in spec.lead_for), None)


def parse_source(weights: str) -> tuple[Architecture, str] | None:
    """(architecture, "imagenet" or "none") for a named weights source, None for a checkpoint path."""
    if weights in (IMAGENET, UNTRAINED):
        return DEFAULT, weights
    name, sep, kind = weights.partition(":")
    if sep and kind in (IMAGENET, UNTRAINED) and name in _REGISTRY:
        return _REGISTRY[name], kind
    return None


def named_sources() -> tuple[str, ...]:
    """The weights sources a picker offers besides checkpoints: the default's imagenet and none, then each other
    architecture's ImageNet weights."""
    others = tuple(spec.source(IMAGENET) for spec in with_imagenet() if spec is not DEFAULT)
    return (DEFAULT.source(IMAGENET), DEFAULT.source(UNTRAINED), *others)


def weights_help() -> str:
    """The `--weights` help of the commands that load a model (torch-free: the CLI builds its parsers from it)."""
    return f"{', '.join(named_sources())}, or a dlguide checkpoint PATH"


def source_label(weights: str) -> str | None:
    """How a picker names a named weights source, None for a checkpoint path."""
    parsed = parse_source(weights)
    if parsed is None:
        return None
    spec, kind = parsed
    if kind == UNTRAINED:
        return "none (untrained, random init)" if spec is DEFAULT else f"{spec.title}, untrained (random init)"
    if spec is DEFAULT or spec.imagenet is None:
        return "ImageNet (pretrained)"
    return f"{spec.title}, ImageNet ({spec.imagenet.tag})"
