"""The `tf_text_classification` recipe: the guide's IMDB sentiment classifier, as a job of the store."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlguide_core.data.imdb import IMDB_CLASSES, locate_imdb
from dlguide_core.errors import DlguideError
from dlguide_core.tf.configs import TEXT_RECIPE, TextClassificationConfig
from dlguide_core.tf.inference import TEXT_MODEL_FILE, classify_reviews, save_final_model
from dlguide_core.tf.loop import TfRun, fit, restore_state, resuming, write_json
from dlguide_core.tf.models import build_text_model, build_vectorizer, export_text_model
from dlguide_core.tf.runtime import import_tensorflow
from dlguide_core.training.configs import RunContext, RunResult

VOCABULARY_FILE = "vocabulary.json"
GUIDE_REVIEWS = ("The movie was great!", "The movie was okay.", "The movie was terrible...")


def _text_datasets(cfg: TextClassificationConfig, root: Path) -> tuple[Any, Any, Any]:
    """(train, val, test) unbatched (text, label) datasets, split exactly as the guide does."""
    import keras

    common = {"class_names": list(IMDB_CLASSES), "batch_size": None, "seed": cfg.seed, "verbose": False}
    # class_names restricts the folders read, so aclImdb/train/unsup is ignored without deleting it
    train, val = keras.utils.text_dataset_from_directory(root / "train", validation_split=cfg.validation_split,
                                                         subset="both", **common)
    test = keras.utils.text_dataset_from_directory(root / "test", **common)
    return train, val, test


def _vectorized(ds: Any, vectorizer: Any) -> Any:
    import tensorflow as tf

    # Vectorise once, in big batches, and keep the integer sequences in memory; unbatch() forgets
    # the length, which Keras needs for a known number of steps, so state it again.
    vectorized = ds.batch(1024).map(lambda text, label: (vectorizer(text), label)).unbatch()
    return vectorized.apply(tf.data.experimental.assert_cardinality(ds.cardinality())).cache()


def _text_epoch_data(train: Any, size: int, cfg: TextClassificationConfig) -> Callable[[int, int], dict]:
    import tensorflow as tf

    def epoch_data(epoch: int, skip_batches: int) -> dict[str, Any]:
        shuffled = train.shuffle(size, seed=cfg.seed * 100_003 + epoch, reshuffle_each_iteration=False)
        return {"x": shuffled.batch(cfg.batch_size).skip(skip_batches).prefetch(tf.data.AUTOTUNE), "shuffle": False}

    return epoch_data


def _text_vectorizer(cfg: TextClassificationConfig, train_raw: Any, ctx: RunContext) -> Any:
    """Adapted on the training texts once; the vocabulary is kept so a resume reuses it."""
    stored = ctx.job_dir / VOCABULARY_FILE
    if resuming(ctx) and stored.is_file():
        return build_vectorizer(cfg, json.loads(stored.read_text()))
    vectorizer = build_vectorizer(cfg)
    vectorizer.adapt(train_raw.map(lambda text, label: text).batch(1024))
    ctx.job_dir.mkdir(parents=True, exist_ok=True)
    write_json(stored, vectorizer.get_vocabulary())
    return vectorizer


def run_text_classification(cfg: TextClassificationConfig, ctx: RunContext) -> RunResult:
    """The registry entry of tf_text_classification."""
    tf = import_tensorflow(cfg.device, ctx.slot)
    import keras

    keras.utils.set_random_seed(cfg.seed)
    train_raw, val_raw, test_raw = _text_datasets(cfg, locate_imdb(cfg.data))
    size = int(train_raw.cardinality())
    if size < 1:
        raise DlguideError("the training split holds no reviews; lower the validation split or add data")
    vectorizer = _text_vectorizer(cfg, train_raw, ctx)
    train, val = _vectorized(train_raw, vectorizer), _vectorized(val_raw, vectorizer)
    run = TfRun(cfg, TEXT_RECIPE, build_text_model(cfg), _text_epoch_data(train, size, cfg),
                {"x": val.batch(256).prefetch(tf.data.AUTOTUNE)}, math.ceil(size / cfg.batch_size),
                IMDB_CLASSES, ctx.job_dir)
    if resuming(ctx):
        restore_state(run)
    result = fit(run, ctx.sink)
    if result.status == "completed":
        _finish_text(run, export_text_model(vectorizer, run.model), test_raw)
    return result


def _finish_text(run: TfRun, export: Any, test_raw: Any) -> None:
    """The guide's end: test accuracy of the exported model, and its predictions for typed examples."""
    result = export.evaluate(test_raw.batch(256), return_dict=True, verbose=0)
    examples = classify_reviews(export, GUIDE_REVIEWS)
    save_final_model(run, TEXT_MODEL_FILE, export, {
        "test_loss": float(result["loss"]), "test_accuracy": float(result["accuracy"]),
        "class_names": list(IMDB_CLASSES), "examples": [{"text": t, "positive": p} for t, p in examples]})
