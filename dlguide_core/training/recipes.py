"""The recipe registry: a recipe's name -> its config class and its run function ("module:function").

It starts with the PyTorch recipes defined here and knows nothing of the others: `dlguide_core.jobs.catalog`
registers every other job kind (the TensorFlow recipes when TensorFlow is installed, the `evaluate` kind)
and is what the CLI, the pages and the job processes ask. The run function is imported only when a job runs,
so registering a recipe imports neither torch nor TensorFlow. The run contract is `configs.py`.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dlguide_core.training.configs import (
    ArchitectureConfig,
    CifarNetConfig,
    ConfigError,
    InceptionV3Config,
    ResNet50Config,
    RunContext,
    RunResult,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    # A recipe's config: a frozen dataclass instance (configs.py); `asdict` of it is the job's stored config
    RecipeConfig = DataclassInstance


@dataclass(frozen=True)
class Recipe:
    name: str
    framework: str  # "pytorch" or "tensorflow"
    config_cls: type[RecipeConfig]
    entry: str  # "package.module:function", imported lazily
    summary: str
    arch: str | None = None  # the dlguide_core.vision.models architecture, for PyTorch recipes
    kind: str = "train"  # "train", or "evaluate" (issue 13): no curves, checkpoint nor TensorBoard files

    def run_function(self) -> Callable[[Any, RunContext], RunResult]:
        module, _, func = self.entry.partition(":")
        return getattr(importlib.import_module(module), func)

    def make_config(self, **overrides: Any) -> Any:
        """Defaults + overrides (None means "keep the default"); unknown fields are refused."""
        names = {f.name for f in dataclasses.fields(self.config_cls)}
        unknown = sorted({k for k, v in overrides.items() if v is not None} - names)  # unset CLI flags pass
        if unknown:
            raise ConfigError(f"{self.name} has no field(s) {', '.join(unknown)}; fields: {', '.join(sorted(names))}")
        return self.config_cls(**{k: v for k, v in overrides.items() if v is not None})

    def config_from_dict(self, data: dict[str, Any]) -> Any:
        """Rebuild a stored config; fields added since are defaulted, vanished ones dropped."""
        names = {f.name for f in dataclasses.fields(self.config_cls)}
        return self.config_cls(**{k: v for k, v in data.items() if k in names})


def _pytorch(config_cls: type[ArchitectureConfig], summary: str) -> Recipe:
    """A PyTorch recipe named after the architecture it trains."""
    return Recipe(config_cls.ARCH, "pytorch", config_cls, "dlguide_core.training.loop:run_recipe", summary,
                  arch=config_cls.ARCH)


PYTORCH_RECIPES = (
    _pytorch(InceptionV3Config, "Fine-tune Inception v3 on an ImageFolder dataset (tiny-imagenet-200)"),
    _pytorch(CifarNetConfig, "The guide's small CNN on CIFAR-10"),
    _pytorch(ResNet50Config, "Fine-tune ResNet-50 (ImageNet IMAGENET1K_V2) on the same ImageFolder data"),
)
# The registry starts with its own recipes (the PyTorch loop looks them up in any process); other job kinds
# are added by calling register() (dlguide_core.jobs.catalog does, once per process), never by an import.
_REGISTRY: dict[str, Recipe] = {recipe.name: recipe for recipe in PYTORCH_RECIPES}


def register(recipe: Recipe) -> Recipe:
    _REGISTRY[recipe.name] = recipe
    return recipe


def recipes() -> dict[str, Recipe]:
    """Every registered training recipe (what `train --recipe` and the Train form offer)."""
    return {name: r for name, r in _REGISTRY.items() if r.kind == "train"}


def get_recipe(name: str) -> Recipe:
    """A registered training recipe or another job kind (`evaluate`) by name."""
    if name not in _REGISTRY:
        raise ConfigError(f"unknown recipe {name!r}; choose one of {', '.join(recipes())}")
    return _REGISTRY[name]


def is_training(recipe: str) -> bool:
    """Whether a job of `recipe` trains (has curves, a checkpoint, TensorBoard files); an unknown
    name (a recipe of a framework not installed here) counts as training."""
    found = _REGISTRY.get(recipe)
    return found is None or found.kind == "train"
