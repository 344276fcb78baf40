"""The guide's two TensorFlow case studies: their recipe names and configs (the guide's defaults).

`tf_fashion_mnist` (basic image classification, tf/fashion_mnist.py) and
`tf_text_classification` (IMDB sentiment, tf/text.py) run as jobs exactly like the PyTorch
recipes. Nothing here imports TensorFlow: `dlguide_core.jobs.catalog` registers their recipes
when TensorFlow is installed, and names TENSORFLOW_RECIPES to say why they are missing when it is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlguide_core.data.fashion_mnist import find_fashion_folders
from dlguide_core.data.imdb import find_imdb_trees
from dlguide_core.training.fields import MAX_STEPS, check_fields, device_field, number, whole

FASHION_RECIPE, TEXT_RECIPE = "tf_fashion_mnist", "tf_text_classification"
# Registered only when TensorFlow is installed; named here so the CLI and the job runner can say why
# one is missing instead of "unknown recipe".
TENSORFLOW_RECIPES = (FASHION_RECIPE, TEXT_RECIPE)


@dataclass(frozen=True)
class FashionMnistConfig:
    """Flatten(28x28) -> Dense 128 relu -> Dense 10; Adam; 10 epochs (Keras' default batch of 32)."""

    # Ranges and the device rule declared in the fields' metadata (training/fields.py), like the PyTorch recipes'.
    data: str = ""  # a folder with the four idx .gz files; "" = keras.datasets (online)
    epochs: int = whole(10, "epochs", 1, 10_000)
    batch_size: int = whole(32, "batch size", 1, 65_536)
    lr: float = number(0.001, "learning rate", 0.0, 10.0, low_open=True)  # Adam's default, as the guide leaves it
    hidden_units: int = whole(128, "hidden units", 1, 65_536)
    max_steps: int | None = whole(None, "max steps", 1, MAX_STEPS)  # stop (successfully) after this many steps
    seed: int = whole(0, "seed", 0, 2**32 - 1)
    device: str = device_field()  # auto (a GPU when TensorFlow sees one), cpu, cuda or cuda:N (a GPU, required)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class TextClassificationConfig:
    """The IMDB pipeline: TextVectorization(10k, 250) -> Embedding 16 -> pooling -> Dense 1."""

    data: str = ""  # an aclImdb/ tree (or its parent); "" = the cached or downloaded one
    epochs: int = whole(10, "epochs", 1, 10_000)
    batch_size: int = whole(32, "batch size", 1, 65_536)
    lr: float = number(0.001, "learning rate", 0.0, 10.0, low_open=True)
    validation_split: float = number(0.2, "validation split", 0.0, 1.0, low_open=True, high_open=True)
    seed: int = whole(42, "seed", 0, 2**32 - 1)  # the split's seed, as in the guide
    max_tokens: int = whole(10_000, "max tokens", 2, 1_000_000)
    sequence_length: int = whole(250, "sequence length", 1, 100_000)
    embedding_dim: int = whole(16, "embedding dim", 1, 65_536)
    dropout: float = number(0.2, "dropout", 0.0, 1.0, high_open=True)
    max_steps: int | None = whole(None, "max steps", 1, MAX_STEPS)
    device: str = device_field()

    def __post_init__(self) -> None:
        check_fields(self)


def local_datasets(recipe: str, roots: list[Path]) -> list[Path]:
    """The local copies under `roots` that `recipe` can train on (for the Train page's picker)."""
    return find_fashion_folders(roots) if recipe == FASHION_RECIPE else find_imdb_trees(roots)
