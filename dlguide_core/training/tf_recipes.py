"""The guide's two TensorFlow case studies as recipes of the job system.

`tf_fashion_mnist` (basic image classification) and `tf_text_classification` (IMDB
sentiment) run as jobs exactly like the PyTorch recipes: the same RunContext, sink,
statuses, cancel and resume. A Keras callback turns every batch into `sink.on_step`
and asks `sink.should_stop()`; a cancel sets `model.stop_training`, so Keras stops
after the current batch, and the run is saved. Checkpoints are Keras `.keras` files
under the job folder, committed by a small JSON record written last (see save_state).

TensorFlow is imported only inside functions, so this module (and the recipe
registry that imports it) loads without TensorFlow; the recipes are then simply not
registered and `tensorflow_status()` says why.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import string
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from dlguide_core.data.tf_data import (
    FASHION_CLASSES,
    IMDB_CLASSES,
    find_fashion_folders,
    find_imdb_trees,
    load_fashion_mnist,
    locate_imdb,
)
from dlguide_core.errors import DlguideError
from dlguide_core.training.recipes import (
    TENSORFLOW_RECIPES,
    ConfigError,
    Recipe,
    RunContext,
    RunResult,
    gpu_index,
    register,
)
from dlguide_core.training.sinks import TrainingSink
from dlguide_core.vision import images

FASHION_RECIPE, TEXT_RECIPE = TENSORFLOW_RECIPES  # "tf_fashion_mnist", "tf_text_classification"
STATE_FILE = "checkpoint.json"  # the commit record of the latest .keras checkpoint
EVALUATION_FILE = "evaluation.json"
FASHION_MODEL_FILE = "model.keras"  # logits model; predict adds the guide's Softmax
TEXT_MODEL_FILE = "export.keras"  # raw strings in, sigmoid probability out
VOCABULARY_FILE = "vocabulary.json"
GRID_SIZE = 15  # the guide plots the first 15 test images (5 rows x 3 columns)
GUIDE_REVIEWS = ("The movie was great!", "The movie was okay.", "The movie was terrible...")
INSTALL_HINT = "pip install tensorflow-cpu (tensorflow-rocm on ROCm hosts)"


class TensorFlowUnavailable(DlguideError):
    """TensorFlow is not installed or does not import."""


# ------------------------------------------------------------------ configs (the guide's defaults)


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


# ------------------------------------------------------------------ TensorFlow availability and import


@dataclass(frozen=True)
class TensorFlowStatus:
    available: bool
    reason: str


def tensorflow_status() -> TensorFlowStatus:
    """Whether the TensorFlow recipes can run, without importing TensorFlow (that takes seconds)."""
    if importlib.util.find_spec("tensorflow") is None:
        return TensorFlowStatus(False, f"TensorFlow is not installed, so the TensorFlow recipes are hidden: "
                                       f"{INSTALL_HINT}, then restart the app")
    if importlib.util.find_spec("keras") is None:
        return TensorFlowStatus(False, f"Keras is missing next to TensorFlow: {INSTALL_HINT}")
    return TensorFlowStatus(True, "TensorFlow is installed")


# The first import_tensorflow call's (device, slot): TensorFlow fixes its visible GPUs once per process.
_gpu_settings: list[tuple[str, int]] = []
_gpu_lock = threading.Lock()


def import_tensorflow(device: str = "auto", slot: int = 0) -> Any:
    """Import TensorFlow once per process, with memory growth on every GPU.

    Memory growth makes TensorFlow take GPU memory as it needs it instead of all of it
    up front, so it can share a GPU with PyTorch (which runs in other processes).
    The first call's `device` and `slot` pin the GPUs for the whole process; later calls (the
    data loaders, the model loader) get the same module and change nothing, whatever they pass."""
    tf = _tensorflow_module()
    with _gpu_lock:
        if not _gpu_settings:
            _configure_gpus(tf, device, slot)  # a ConfigError leaves it unset: the next call says it again
            _gpu_settings.append((device, slot))
    _register_keras_objects()  # Keras loads TensorFlow's devices: only once the GPUs are set
    return tf


@lru_cache(maxsize=1)
def _tensorflow_module() -> Any:
    status = tensorflow_status()
    if not status.available:
        raise TensorFlowUnavailable(status.reason)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep oneDNN/cpu-feature banners out of job logs
    _load_triton_first()
    try:
        import tensorflow as tf
    except Exception as exc:  # noqa: BLE001 - a broken TF install raises anything from ImportError to OSError
        raise TensorFlowUnavailable(f"TensorFlow does not import ({str(exc)[:160]}); reinstall it") from None
    return tf


@lru_cache(maxsize=1)
def _register_keras_objects() -> None:
    import keras

    if keras.saving.get_registered_object("dlguide>custom_standardization") is None:
        keras.saving.register_keras_serializable(package="dlguide")(custom_standardization)


def _load_triton_first() -> None:
    # TensorFlow and Triton (which torchvision and torch.compile import) each bundle LLVM. Loading
    # Triton after TensorFlow segfaults the process (tensorflow-cpu 2.21 with triton 3.8); the other
    # order works. So a process that may meet both (the app, the tests) loads Triton first.
    if importlib.util.find_spec("triton") is not None:
        try:
            import triton  # noqa: F401
        except Exception:  # noqa: BLE001 - a broken Triton only matters to torch.compile
            pass


def _configure_gpus(tf: Any, device: str, slot: int) -> None:
    """cpu hides the GPUs; cuda[:N] demands one (TensorFlow calls it GPU:N); auto takes the queue's slot."""
    gpus = tf.config.list_physical_devices("GPU")
    if device.startswith("cuda"):
        if not gpus:
            raise ConfigError(f"device {device} was asked for, but TensorFlow sees no GPU (tensorflow-cpu, or no "
                              f"ROCm/CUDA build of TensorFlow); use --device auto or cpu")
        index = device.partition(":")[2]
        if index and int(index) >= len(gpus):
            raise ConfigError(f"device {device} was asked for, but TensorFlow sees {len(gpus)} GPU(s)")
        slot = int(index) if index else slot
    try:
        if device == "cpu":
            tf.config.set_visible_devices([], "GPU")
        elif len(gpus) > 1:
            tf.config.set_visible_devices([gpus[gpu_index(slot, len(gpus))]], "GPU")  # the slot the queue gave
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
    except RuntimeError:
        pass  # TensorFlow already initialised its GPUs in this process: the settings are fixed by then


def custom_standardization(input_data: Any) -> Any:
    """The guide's standardisation: lower-case, `<br />` -> space, strip ASCII punctuation."""
    import tensorflow as tf

    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
    return tf.strings.regex_replace(stripped_html, f"[{re.escape(string.punctuation)}]", "")


# ------------------------------------------------------------------ models


def build_fashion_model(cfg: FashionMnistConfig) -> Any:
    import keras

    model = keras.Sequential([
        keras.Input(shape=(28, 28)),
        keras.layers.Flatten(),  # (B, 784)
        keras.layers.Dense(cfg.hidden_units, activation="relu"),
        keras.layers.Dense(len(FASHION_CLASSES)),  # logits
    ], name="fashion_mnist")
    model.compile(optimizer=keras.optimizers.Adam(cfg.lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def build_vectorizer(cfg: TextClassificationConfig, vocabulary: list[str] | None = None) -> Any:
    import keras

    layer = keras.layers.TextVectorization(max_tokens=cfg.max_tokens, standardize=custom_standardization,
                                           output_mode="int", output_sequence_length=cfg.sequence_length)
    if vocabulary is not None:
        layer.set_vocabulary(vocabulary)
    return layer


def build_text_model(cfg: TextClassificationConfig) -> Any:
    import keras

    model = keras.Sequential([
        keras.Input(shape=(cfg.sequence_length,), dtype="int64"),
        keras.layers.Embedding(cfg.max_tokens + 1, cfg.embedding_dim),  # (B, 250, 16)
        keras.layers.Dropout(cfg.dropout),
        keras.layers.GlobalAveragePooling1D(),  # (B, 16)
        keras.layers.Dropout(cfg.dropout),
        keras.layers.Dense(1),  # a logit: > 0 means positive
    ], name="imdb_sentiment")
    model.compile(optimizer=keras.optimizers.Adam(cfg.lr), loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=[keras.metrics.BinaryAccuracy(threshold=0.0, name="accuracy")])
    return model


def export_text_model(vectorizer: Any, model: Any) -> Any:
    """The guide's export: raw strings -> vectorizer -> trained model -> sigmoid."""
    import keras

    inputs = keras.Input(shape=(), dtype="string")
    outputs = keras.layers.Activation("sigmoid")(model(vectorizer(inputs)))
    export = keras.Model(inputs, outputs, name="imdb_sentiment_export")
    export.compile(loss=keras.losses.BinaryCrossentropy(from_logits=False), optimizer="adam",
                   metrics=[keras.metrics.BinaryAccuracy(name="accuracy")])
    return export


# ------------------------------------------------------------------ the run: state, callback, epoch loop


@dataclass
class TfRun:
    """One TensorFlow run; `step` is global and continues across resumes, `batch` counts
    the batches of `epoch` already trained on, so a resume skips exactly those."""

    cfg: Any
    recipe: str
    model: Any
    epoch_data: Callable[[int, int], dict[str, Any]]  # (epoch, skip batches) -> model.fit kwargs
    val_data: dict[str, Any]  # model.evaluate kwargs
    steps_per_epoch: int
    class_names: tuple[str, ...]
    job_dir: Path
    step: int = 0
    epoch: int = 0
    batch: int = 0
    stopped: bool = False
    extra_state: dict[str, Any] = field(default_factory=dict)

    @property
    def total_steps(self) -> int:
        steps = self.cfg.epochs * self.steps_per_epoch
        return min(steps, self.cfg.max_steps) if self.cfg.max_steps else steps

    @property
    def out_of_steps(self) -> bool:
        return bool(self.cfg.max_steps) and self.step >= self.cfg.max_steps


def make_sink_callback(run: TfRun, sink: TrainingSink) -> Any:
    """A Keras callback that streams every batch into `sink` and stops when it asks to."""
    import keras

    class SinkCallback(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.started = time.perf_counter()

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            logs = logs or {}
            run.step, run.batch = run.step + 1, run.batch + 1
            rate = run.cfg.batch_size / max(time.perf_counter() - self.started, 1e-9)
            lr = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
            # Keras reports the running mean of the epoch so far, for loss and accuracy alike.
            sink.on_step(run.step, run.epoch, float(logs.get("loss", math.nan)), lr, rate,
                         accuracy=float(logs.get("accuracy", math.nan)))
            if sink.should_stop():
                run.stopped = True
            if run.stopped or run.out_of_steps:
                self.model.stop_training = True  # Keras ends fit() after this batch

    return SinkCallback()


def train_one_epoch(run: TfRun, sink: TrainingSink) -> dict[str, float]:
    """The rest of `run.epoch` (from `run.batch`) through model.fit; returns Keras' epoch logs."""
    if run.batch >= run.steps_per_epoch:
        return {}
    history = run.model.fit(**run.epoch_data(run.epoch, run.batch), epochs=run.epoch + 1, initial_epoch=run.epoch,
                            callbacks=[make_sink_callback(run, sink)], verbose=0)
    return {name: float(values[-1]) for name, values in history.history.items() if values}


def evaluate(run: TfRun) -> dict[str, float]:
    result = run.model.evaluate(**run.val_data, return_dict=True, verbose=0)
    return {"val_loss": float(result["loss"]), "top1": 100.0 * float(result["accuracy"])}


def fit(run: TfRun, sink: TrainingSink) -> RunResult:
    """Train until the last epoch, `max_steps` or a stop request, saving after every epoch."""
    import keras

    sink.on_start(total_steps=run.total_steps, epochs=run.cfg.epochs, class_names=run.class_names,
                  start_step=run.step, start_epoch=run.epoch)
    path = None
    while run.epoch < run.cfg.epochs and not run.out_of_steps:
        train = train_one_epoch(run, sink)
        if run.stopped:
            return RunResult("stopped", run.step, run.epoch, save_state(run, sink))
        metrics = {"train_loss": train.get("loss", math.nan), "train_accuracy": 100.0 * train.get("accuracy", math.nan),
                   **evaluate(run), "lr": float(keras.ops.convert_to_numpy(run.model.optimizer.learning_rate))}
        sink.on_epoch(run.epoch, metrics)
        if run.batch >= run.steps_per_epoch:
            run.epoch, run.batch = run.epoch + 1, 0
        path = save_state(run, sink)
    return RunResult("completed", run.step, run.epoch, path)


# ------------------------------------------------------------------ checkpoints


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # atomic: a reader sees the old record or the new one


def save_state(run: TfRun, sink: TrainingSink) -> Path:
    """A new `ckpt-<step>.keras` (weights + optimiser), then the JSON record naming it.

    The record is written last and atomically, so a crash mid-save leaves the previous
    checkpoint in force; older .keras files are removed only after the record moved on."""
    path = run.job_dir / f"ckpt-{run.step:08d}.keras"
    tmp = run.job_dir / f"tmp-{run.step:08d}.keras"  # Keras insists on the .keras suffix
    run.job_dir.mkdir(parents=True, exist_ok=True)
    sink.flush()  # the store must hold every step the checkpoint covers before the record moves on
    run.model.save(tmp)
    os.replace(tmp, path)
    _write_json(run.job_dir / STATE_FILE, {
        "checkpoint": path.name, "recipe": run.recipe, "config": asdict(run.cfg), "step": run.step,
        "epoch": run.epoch, "batch": run.batch, "class_names": list(run.class_names), **run.extra_state})
    for old in run.job_dir.glob("ckpt-*.keras"):
        if old != path:
            old.unlink(missing_ok=True)
    sink.on_checkpoint(path, step=run.step, epoch=run.epoch)
    return path


def read_state(job_dir: Path) -> dict[str, Any] | None:
    record = job_dir / STATE_FILE
    if not record.is_file():
        return None
    return json.loads(record.read_text())


def _resuming(ctx: RunContext) -> bool:
    # The job folder is the job's own, so a committed record there is this job's earlier attempt.
    # (The job runner sets ctx.resume from the PyTorch checkpoint file, which these recipes never write.)
    return ctx.resume or (ctx.job_dir / STATE_FILE).is_file()


def restore_state(run: TfRun) -> None:
    """Model weights, optimiser state and position from the last committed checkpoint."""
    import keras

    state = read_state(run.job_dir)
    if state is None:
        return  # nothing saved yet (cancelled before the first batch): start over
    if state.get("recipe") != run.recipe:
        raise DlguideError(f"{run.job_dir} holds a {state.get('recipe')} checkpoint, not {run.recipe}")
    run.model = keras.models.load_model(run.job_dir / state["checkpoint"])
    run.step, run.epoch, run.batch = int(state["step"]), int(state["epoch"]), int(state["batch"])


# ------------------------------------------------------------------ Fashion-MNIST


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
    if _resuming(ctx):
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
    _save_final(run, FASHION_MODEL_FILE, run.model, {"test_loss": float(loss), "test_accuracy": float(accuracy),
                                                       "class_names": list(FASHION_CLASSES), "samples": samples})


def _save_final(run: TfRun, filename: str, model: Any, evaluation: dict[str, Any]) -> None:
    tmp = run.job_dir / f"tmp-{filename}"
    model.save(tmp)
    os.replace(tmp, run.job_dir / filename)
    _write_json(run.job_dir / EVALUATION_FILE, {"recipe": run.recipe, "model": filename, **evaluation})


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


# ------------------------------------------------------------------ IMDB text classification


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
    if _resuming(ctx) and stored.is_file():
        return build_vectorizer(cfg, json.loads(stored.read_text()))
    vectorizer = build_vectorizer(cfg)
    vectorizer.adapt(train_raw.map(lambda text, label: text).batch(1024))
    ctx.job_dir.mkdir(parents=True, exist_ok=True)
    _write_json(stored, vectorizer.get_vocabulary())
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
    if _resuming(ctx):
        restore_state(run)
    result = fit(run, ctx.sink)
    if result.status == "completed":
        _finish_text(run, export_text_model(vectorizer, run.model), test_raw)
    return result


def _finish_text(run: TfRun, export: Any, test_raw: Any) -> None:
    """The guide's end: test accuracy of the exported model, and its predictions for typed examples."""
    result = export.evaluate(test_raw.batch(256), return_dict=True, verbose=0)
    examples = classify_reviews(export, GUIDE_REVIEWS)
    _save_final(run, TEXT_MODEL_FILE, export, {
        "test_loss": float(result["loss"]), "test_accuracy": float(result["accuracy"]),
        "class_names": list(IMDB_CLASSES), "examples": [{"text": t, "positive": p} for t, p in examples]})


# ------------------------------------------------------------------ using a finished job's model


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


def local_datasets(recipe: str, roots: list[Path]) -> list[Path]:
    """The local copies under `roots` that `recipe` can train on (for the Train page's picker)."""
    return find_fashion_folders(roots) if recipe == FASHION_RECIPE else find_imdb_trees(roots)


def finished_models(recipe: str | None = None, store: Any = None) -> list[TfModelInfo]:
    """The final models of succeeded TensorFlow jobs in the job store, newest first.

    Pass an open JobStore (the app's cached one) to read through it; without one, a
    store is opened and closed for this call."""
    if store is None:
        from dlguide_core.jobs.store import JobStore

        own = JobStore()
        try:
            return finished_models(recipe, own)
        finally:
            own.close()
    jobs = store.list_jobs()
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
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise DlguideError(f"{Path(path).name}: not a loadable Keras model ({first})") from None


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


# ------------------------------------------------------------------ registration


def register_recipes() -> bool:
    """Add the two recipes to the registry when TensorFlow is installed; False (and absent) otherwise."""
    if not tensorflow_status().available:
        return False
    register(Recipe(FASHION_RECIPE, "tensorflow", FashionMnistConfig,
                    "dlguide_core.training.tf_recipes:run_fashion_mnist",
                    "TensorFlow: the guide's Fashion-MNIST classifier (Flatten, Dense 128, Dense 10)"))
    register(Recipe(TEXT_RECIPE, "tensorflow", TextClassificationConfig,
                    "dlguide_core.training.tf_recipes:run_text_classification",
                    "TensorFlow: the guide's IMDB sentiment classifier (TextVectorization, Embedding 16)"))
    return True


register_recipes()
