"""The guide's two TensorFlow case studies: their recipe names and configs (the guide's defaults).

`tf_fashion_mnist` (basic image classification, tf/fashion_mnist.py) and
`tf_text_classification` (IMDB sentiment, tf/text.py) run as jobs exactly like the PyTorch
recipes. Nothing here imports TensorFlow: `dlguide_core.jobs.catalog` registers their recipes
when TensorFlow is installed, and names TENSORFLOW_RECIPES to say why they are missing when it is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlguide_core.data.fashion_mnist import find_fashion_folders
from dlguide_core.data.imdb import find_imdb_trees
from dlguide_core.training.configs import ConfigError

FASHION_RECIPE, TEXT_RECIPE = "tf_fashion_mnist", "tf_text_classification"
# Registered only when TensorFlow is installed; named here so the CLI and the job runner can say why
# one is missing instead of "unknown recipe".
TENSORFLOW_RECIPES = (FASHION_RECIPE, TEXT_RECIPE)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass(frozen=True)
class FashionMnistConfig:
    """Flatten(28x28) -> Dense 128 relu -> Dense 10; Adam; 10 epochs (Keras' default batch of 32)."""

    data: str = ""  # a folder with the four idx .gz files; "" = keras.datasets (online)
    epochs: int = 10
    batch_size: int = 32
    lr: float = 0.001  # Adam's default, as the guide leaves it
    hidden_units: int = 128
    max_steps: int | None = None  # stop (successfully) after this many global steps
    seed: int = 0
    device: str = "auto"  # auto (a GPU when TensorFlow sees one), cpu, cuda or cuda:N (a GPU, required)

    def __post_init__(self) -> None:
        _check_common(self)
        _check(self.hidden_units >= 1, "hidden units must be at least 1")


@dataclass(frozen=True)
class TextClassificationConfig:
    """The IMDB pipeline: TextVectorization(10k, 250) -> Embedding 16 -> pooling -> Dense 1."""

    data: str = ""  # an aclImdb/ tree (or its parent); "" = the cached or downloaded one
    epochs: int = 10
    batch_size: int = 32
    lr: float = 0.001
    validation_split: float = 0.2
    seed: int = 42  # the split's seed, as in the guide
    max_tokens: int = 10_000
    sequence_length: int = 250
    embedding_dim: int = 16
    dropout: float = 0.2
    max_steps: int | None = None
    device: str = "auto"

    def __post_init__(self) -> None:
        _check_common(self)
        _check(0.0 < self.validation_split < 1.0, "validation split must be between 0 and 1")
        _check(self.max_tokens >= 2 and self.sequence_length >= 1, "max tokens >= 2 and sequence length >= 1")
        _check(self.embedding_dim >= 1, "embedding dim must be at least 1")
        _check(0.0 <= self.dropout < 1.0, "dropout must be in [0, 1)")


def _check_common(cfg: Any) -> None:
    _check(cfg.epochs >= 1, "epochs must be at least 1")
    _check(cfg.batch_size >= 1, "batch size must be at least 1")
    _check(cfg.lr > 0, "learning rate must be positive")
    _check(cfg.max_steps is None or cfg.max_steps >= 1, "max steps must be at least 1")
    base, _, index = cfg.device.partition(":")
    _check(base in ("auto", "cpu", "cuda") and (not index or (base == "cuda" and index.isdigit())),
           "device must be auto, cpu, cuda or cuda:N for the TensorFlow recipes")


def local_datasets(recipe: str, roots: list[Path]) -> list[Path]:
    """The local copies under `roots` that `recipe` can train on (for the Train page's picker)."""
    return find_fashion_folders(roots) if recipe == FASHION_RECIPE else find_imdb_trees(roots)
