"""Every job kind this installation can run: the one place that knows the registry's plug-ins.

The recipe registry (training/recipes.py) holds the PyTorch recipes and knows nothing else. The first
call here registers the rest, once per process: the TensorFlow recipes when TensorFlow is installed
(tf/configs.py), and the `evaluate` job kind (jobs/evaluation_job.py). The CLI, the pages,
the job runner and the queue ask this module whenever they need every kind; a TensorFlow recipe on a
machine without TensorFlow is explained (tensorflow_status().reason), not "unknown".

Light at import and at call (no torch, no TensorFlow): `--help` and `jobs list` go through here.
"""

from __future__ import annotations

import threading

from dlguide_core.jobs.evaluation_job import evaluation_recipe
from dlguide_core.tf import runtime as tf_runtime
from dlguide_core.tf.configs import (
    FASHION_RECIPE,
    TENSORFLOW_RECIPES,
    TEXT_RECIPE,
    FashionMnistConfig,
    TextClassificationConfig,
)
from dlguide_core.training import recipes as registry
from dlguide_core.training.configs import ConfigError
from dlguide_core.training.recipes import Recipe


def tensorflow_recipes() -> tuple[Recipe, Recipe]:
    """The two TensorFlow recipes (registered when TensorFlow is installed): configs in tf/configs.py."""
    return (Recipe(FASHION_RECIPE, "tensorflow", FashionMnistConfig,
                   "dlguide_core.tf.fashion_mnist:run_fashion_mnist",
                   "TensorFlow: the guide's Fashion-MNIST classifier (Flatten, Dense 128, Dense 10)"),
            Recipe(TEXT_RECIPE, "tensorflow", TextClassificationConfig,
                   "dlguide_core.tf.text:run_text_classification",
                   "TensorFlow: the guide's IMDB sentiment classifier (TextVectorization, Embedding 16)"))


_loaded: list[bool] = []  # non-empty once this process registered its job kinds
_lock = threading.Lock()


def register_job_kinds() -> None:
    """Register the TensorFlow recipes (when TensorFlow is installed) and the evaluate kind, once."""
    with _lock:
        if _loaded:
            return
        _loaded.append(True)
        if tf_runtime.tensorflow_status().available:
            for recipe in tensorflow_recipes():
                registry.register(recipe)
        registry.register(evaluation_recipe())


def recipes() -> dict[str, Recipe]:
    """Every training recipe (what `train --recipe` and the Train form offer)."""
    register_job_kinds()
    return registry.recipes()


def get_recipe(name: str) -> Recipe:
    """A training recipe or another job kind (`evaluate`) by name; a TensorFlow recipe this machine
    cannot run says why."""
    register_job_kinds()
    try:
        return registry.get_recipe(name)
    except ConfigError:
        if name in TENSORFLOW_RECIPES:
            raise ConfigError(tf_runtime.tensorflow_status().reason) from None
        raise


def is_training(recipe: str) -> bool:
    """Whether a job of `recipe` trains (has curves, a checkpoint, TensorBoard files); an unknown
    name (a recipe of a framework not installed here) counts as training."""
    register_job_kinds()
    return registry.is_training(recipe)
