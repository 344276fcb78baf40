"""What a finished TensorFlow job leaves behind, and using it: the final model, its evaluation, predictions.

The recipes write the final model and `evaluation.json` (save_final_model); the Classify page finds
them (finished_models, given the jobs it read from its store), loads a model and classifies with it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlguide_core.errors import DlguideError, error_summary
from dlguide_core.tf.configs import FASHION_RECIPE, TEXT_RECIPE
from dlguide_core.tf.loop import TfRun, write_json
from dlguide_core.tf.runtime import import_tensorflow
from dlguide_core.vision import images

EVALUATION_FILE = "evaluation.json"
FASHION_MODEL_FILE = "model.keras"  # logits model; predict adds the guide's Softmax
TEXT_MODEL_FILE = "export.keras"  # raw strings in, sigmoid probability out


def save_final_model(run: TfRun, filename: str, model: Any, evaluation: dict[str, Any]) -> None:
    """The finished run's model as `filename`, then its evaluation.json naming it (written last)."""
    tmp = run.job_dir / f"tmp-{filename}"
    model.save(tmp)
    os.replace(tmp, run.job_dir / filename)
    write_json(run.job_dir / EVALUATION_FILE, {"recipe": run.recipe, "model": filename, **evaluation})


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class TfModelInfo:
    """What a finished TensorFlow job left behind."""

    job_dir: Path
    recipe: str
    model_path: Path
    evaluation: dict[str, Any]

    @property
    def job_id(self) -> str:
        return self.job_dir.name

    @property
    def version(self) -> float:
        """Changes when the model file is rewritten: a cache key for loaded models."""
        return self.model_path.stat().st_mtime


def finished_model(job_dir: str | Path) -> TfModelInfo | None:
    """The final model of a completed TensorFlow job in `job_dir`, or None if it has none."""
    job_dir = Path(job_dir)
    record = job_dir / EVALUATION_FILE
    if not record.is_file():
        return None
    evaluation = json.loads(record.read_text())
    path = job_dir / str(evaluation.get("model", ""))
    if evaluation.get("recipe") not in (FASHION_RECIPE, TEXT_RECIPE) or not path.is_file():
        return None
    return TfModelInfo(job_dir, evaluation["recipe"], path, evaluation)


def finished_models(jobs: Iterable[Any], recipe: str | None = None) -> list[TfModelInfo]:
    """The final models of the succeeded TensorFlow jobs among `jobs` (job records, e.g. a JobStore's
    list_jobs(), newest first), in their order."""
    wanted = (recipe,) if recipe else (FASHION_RECIPE, TEXT_RECIPE)
    infos = (finished_model(job.job_dir) for job in jobs if job.status == "succeeded" and job.recipe in wanted)
    return [info for info in infos if info is not None]


def load_tf_model(path: str | Path) -> Any:
    """A saved .keras model (safe_mode: no arbitrary lambdas are deserialised)."""
    import_tensorflow()
    import keras

    try:
        return keras.models.load_model(path, compile=False, safe_mode=True)
    except (OSError, ValueError, TypeError) as exc:
        raise DlguideError(f"{Path(path).name}: not a loadable Keras model ({error_summary(exc)})") from None


def clothing_input(source: bytes | str | Path, *, name: str | None = None) -> np.ndarray:
    """An image file -> (28, 28) float32 in [0, 1], light garment on a dark ground like Fashion-MNIST."""
    gray = images.load_image(source, name=name).convert("L")
    gray.thumbnail((28, 28))  # keep the aspect ratio, then pad to a square
    canvas = np.asarray(gray, dtype=np.float32) / 255.0
    border = np.concatenate([canvas[0], canvas[-1], canvas[:, 0], canvas[:, -1]])
    if border.mean() > 0.5:
        canvas = 1.0 - canvas  # a photo on a light background: invert, as the dataset's ground is black
    out = np.zeros((28, 28), np.float32)
    top, left = (28 - canvas.shape[0]) // 2, (28 - canvas.shape[1]) // 2
    out[top:top + canvas.shape[0], left:left + canvas.shape[1]] = canvas
    return out


def classify_clothing(model: Any, pixels: np.ndarray, label: int | None = None) -> dict[str, Any]:
    """(28, 28) in [0, 1] -> a prediction sample as evaluation.json stores them:
    {"image": 28x28 ints 0-255, "label": the true class or None, "probs": 10 class probabilities}."""
    probs = softmax(np.asarray(model.predict(pixels[None], verbose=0)))[0]  # the guide's probability_model
    return {"image": (pixels * 255).round().astype(int).tolist(), "label": label,
            "probs": [float(p) for p in probs]}


def classify_reviews(export: Any, texts: list[str] | tuple[str, ...]) -> list[tuple[str, float]]:
    """Raw review texts -> (text, probability the review is positive)."""
    import tensorflow as tf

    probs = np.asarray(export.predict(tf.constant(list(texts)), verbose=0)).reshape(-1)
    return [(text, float(p)) for text, p in zip(texts, probs)]
