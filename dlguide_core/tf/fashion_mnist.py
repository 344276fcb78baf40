"""The `tf_fashion_mnist` recipe: the guide's basic image classification, as a job of the store."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dlguide_core.data.fashion_mnist import FASHION_CLASSES, load_fashion_mnist
from dlguide_core.tf.configs import FASHION_RECIPE, FashionMnistConfig
from dlguide_core.tf.inference import FASHION_MODEL_FILE, save_final_model, softmax
from dlguide_core.tf.loop import TfRun, fit, restore_state, resuming
from dlguide_core.tf.models import build_fashion_model
from dlguide_core.tf.runtime import import_tensorflow
from dlguide_core.training.configs import RunContext, RunResult

GRID_SIZE = 15  # the guide plots the first 15 test images (5 rows x 3 columns)


def _fashion_epoch_data(x: np.ndarray, y: np.ndarray, cfg: FashionMnistConfig) -> Callable[[int, int], dict]:
    def epoch_data(epoch: int, skip_batches: int) -> dict[str, Any]:
        # A shuffle that is a pure function of (seed, epoch): a resumed epoch skips exactly what it trained on.
        order = np.random.default_rng([cfg.seed, epoch]).permutation(len(x))[skip_batches * cfg.batch_size:]
        return {"x": x[order], "y": y[order], "batch_size": cfg.batch_size, "shuffle": False}

    return epoch_data


def run_fashion_mnist(cfg: FashionMnistConfig, ctx: RunContext) -> RunResult:
    """The registry entry of tf_fashion_mnist."""
    import_tensorflow(cfg.device, ctx.slot)
    import keras

    keras.utils.set_random_seed(cfg.seed)
    data = load_fashion_mnist(cfg.data)
    x_train, x_test = data.train_images / np.float32(255.0), data.test_images / np.float32(255.0)  # [0, 1]
    run = TfRun(cfg, FASHION_RECIPE, build_fashion_model(cfg), _fashion_epoch_data(x_train, data.train_labels, cfg),
                {"x": x_test, "y": data.test_labels, "batch_size": 256}, math.ceil(len(x_train) / cfg.batch_size),
                FASHION_CLASSES, ctx.job_dir)
    if resuming(ctx):
        restore_state(run)
    result = fit(run, ctx.sink)
    if result.status == "completed":
        _finish_fashion(run, x_test, data.test_labels)
    return result


def _finish_fashion(run: TfRun, x_test: np.ndarray, y_test: np.ndarray) -> None:
    """The guide's evaluation: test accuracy, and the probabilities of the first test images."""
    loss, accuracy = run.model.evaluate(x_test, y_test, batch_size=256, verbose=0)
    probs = softmax(run.model.predict(x_test[:GRID_SIZE], verbose=0))  # (15, 10)
    samples = [{"image": (x_test[i] * 255).round().astype(int).tolist(), "label": int(y_test[i]),
                "probs": [round(float(p), 6) for p in probs[i]]} for i in range(len(probs))]
    save_final_model(run, FASHION_MODEL_FILE, run.model, {
        "test_loss": float(loss), "test_accuracy": float(accuracy), "class_names": list(FASHION_CLASSES),
        "samples": samples})
