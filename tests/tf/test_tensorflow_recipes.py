"""The TensorFlow recipes (dlguide_core/tf/): the guide's TensorFlow case studies as jobs
of the store, trained for real on generated data in the real formats (idx.gz files, an aclImdb tree).

The job tests share one module-scoped run (each job process imports TensorFlow, which
takes seconds): a Fashion-MNIST job that is cancelled while running and then resumed,
and an IMDB job that runs to the end. The tests then check what each left behind.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from dlguide_core.jobs.queue import resume, submit
from dlguide_core.jobs.store import JobStore, db_path
from dlguide_core.tf import fashion_mnist as tf_fashion_mnist
from dlguide_core.tf import inference as tf_inference
from dlguide_core.tf import loop as tf_loop
from dlguide_core.tf import models as tf_models
from dlguide_core.tf import runtime as tensorflow_runtime
from dlguide_core.tf import text as tf_text
from dlguide_core.tf.configs import (
    FASHION_RECIPE,
    TEXT_RECIPE,
    FashionMnistConfig,
    TextClassificationConfig,
)
from dlguide_core.tf.runtime import TensorFlowDeviceError
from dlguide_core.training.configs import ConfigError
from tests.support.fake_tensorflow import fake_tf
from tests.support.paths import ROOT
from tests.support.tf_datagen import NEGATIVE, POSITIVE, fashion_arrays, write_fashion, write_imdb

HAS_TF = importlib.util.find_spec("tensorflow") is not None
needs_tf = pytest.mark.skipif(not HAS_TF, reason="TensorFlow is not installed (make install adds tensorflow-cpu)")
FINAL = ("succeeded", "failed", "cancelled", "interrupted")
FASHION_EPOCHS, FASHION_BATCH, FASHION_TRAIN = 30, 16, 512  # long enough to cancel mid-run
TEXT_EPOCHS, TEXT_BATCH, TEXT_PER_CLASS = 40, 8, 50


# ------------------------------------------------------------------ no TensorFlow needed


def test_configs_carry_the_guides_defaults() -> None:
    fashion, text = FashionMnistConfig(), TextClassificationConfig()
    assert (fashion.epochs, fashion.hidden_units, fashion.lr, fashion.batch_size) == (10, 128, 0.001, 32)
    assert (text.validation_split, text.seed, text.max_tokens, text.sequence_length) == (0.2, 42, 10_000, 250)
    assert (text.embedding_dim, text.dropout, text.epochs) == (16, 0.2, 10)


@pytest.mark.parametrize("bad", [{"epochs": 0}, {"lr": 0.0}, {"device": "tpu"}, {"validation_split": 1.0},
                                 {"dropout": 1.0}, {"max_tokens": 1}])
def test_impossible_text_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        TextClassificationConfig(**bad)


def test_tf_configs_accept_the_cuda_device_the_cli_offers() -> None:
    assert FashionMnistConfig(device="cuda").device == "cuda"
    assert TextClassificationConfig(device="cuda:1").device == "cuda:1"
    for bad in ("cpu:1", "cuda:x", "gpu"):
        with pytest.raises(ConfigError, match="auto, cpu, cuda or cuda:N"):
            FashionMnistConfig(device=bad)


def test_device_cuda_maps_to_a_tensorflow_gpu_or_says_there_is_none() -> None:
    tf = fake_tf(["GPU:0", "GPU:1"])
    tensorflow_runtime._configure_gpus(tf, "cuda:1", slot=0)
    assert tf.config.visible == ["GPU:1"] and tf.config.growth == ["GPU:0", "GPU:1"]
    tf = fake_tf(["GPU:0", "GPU:1"])
    tensorflow_runtime._configure_gpus(tf, "cuda", slot=1)  # plain cuda: the GPU the queue's slot names
    assert tf.config.visible == ["GPU:1"]
    with pytest.raises(TensorFlowDeviceError, match="TensorFlow sees no GPU") as exc:
        tensorflow_runtime._configure_gpus(fake_tf([]), "cuda", slot=0)
    assert "\n" not in str(exc.value) and "--device auto or cpu" in str(exc.value)
    with pytest.raises(TensorFlowDeviceError, match="sees 2 GPU"):
        tensorflow_runtime._configure_gpus(fake_tf(["GPU:0", "GPU:1"]), "cuda:2", slot=0)
    tf = fake_tf(["GPU:0"])
    tensorflow_runtime._configure_gpus(tf, "cpu", slot=0)
    assert tf.config.visible == []


def test_finished_models_reads_the_jobs_it_is_given() -> None:
    store = JobStore()
    job = store.create(FASHION_RECIPE, "tensorflow", FashionMnistConfig().__dict__)
    store.finish(job.id, "succeeded")
    (job.job_dir / tf_inference.FASHION_MODEL_FILE).write_bytes(b"a model")
    (job.job_dir / tf_inference.EVALUATION_FILE).write_text(json.dumps(
        {"recipe": FASHION_RECIPE, "model": tf_inference.FASHION_MODEL_FILE, "test_accuracy": 0.5}))
    [info] = tf_inference.finished_models(store.list_jobs(), FASHION_RECIPE)
    assert info.job_id == job.id and info.evaluation["test_accuracy"] == 0.5
    assert tf_inference.finished_models(store.list_jobs(), TEXT_RECIPE) == []
    assert [i.job_id for i in tf_inference.finished_models(store.list_jobs())] == [job.id]
    store.close()


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


_ONCE_PER_PROCESS = """
import json, sys, types
# imported first: find_spec("tensorflow") would refuse the stand-in
from dlguide_core.tf import runtime as tensorflow_runtime
from tests.support.fake_tensorflow import fake_tf
tf = fake_tf(["GPU:0", "GPU:1", "GPU:2"])
keras = types.ModuleType("keras")
keras.saving = types.SimpleNamespace(get_registered_object=lambda name: object())
sys.modules.update(tensorflow=tf, keras=keras)  # stand-ins: no GPUs here
tensorflow_runtime.tensorflow_status = lambda: tensorflow_runtime.TensorFlowStatus(True, "stand-in")
tensorflow_runtime._load_triton_first = lambda: None
pinned = []
set_visible = tf.config.set_visible_devices
tf.config.set_visible_devices = lambda devices, kind: (pinned.append(list(devices)), set_visible(devices, kind))
tensorflow_runtime.import_tensorflow("cuda", 2)  # the job: the queue's slot 2
tensorflow_runtime.import_tensorflow()  # fashion_mnist and load_tf_model call it with the defaults
print(json.dumps(pinned))
"""


def test_import_tensorflow_pins_the_gpus_once_per_process() -> None:
    """A later call with the defaults (the Fashion-MNIST loader's) must not re-pin the job to GPU 0."""
    pinned = json.loads(_python(_ONCE_PER_PROCESS).strip().splitlines()[-1])
    assert pinned == [["GPU:2"]]


def test_the_package_and_registry_load_without_importing_tensorflow() -> None:
    out = _python("import sys, json; from dlguide_core.jobs.catalog import recipes; names = list(recipes()); "
                  "import dlguide_core.tf.fashion_mnist, dlguide_core.tf.text, "
                  "dlguide_core.tf.inference, ui.cache, ui.tensorflow; "
                  "print(json.dumps([names, 'tensorflow' in sys.modules, 'keras' in sys.modules]))")
    names, tf_loaded, keras_loaded = json.loads(out.strip().splitlines()[-1])
    assert not tf_loaded and not keras_loaded
    assert (FASHION_RECIPE in names) == HAS_TF and (TEXT_RECIPE in names) == HAS_TF


def test_without_tensorflow_the_recipes_are_missing_and_the_reason_is_given() -> None:
    # sys.modules[name] = None makes find_spec report the package as absent, as on a host without it.
    out = _python("import sys, json; sys.modules['tensorflow'] = None; "
                  "from dlguide_core.jobs.catalog import recipes; "
                  "from dlguide_core.tf.runtime import tensorflow_status; "
                  "s = tensorflow_status(); print(json.dumps([list(recipes()), s.available, s.reason]))")
    names, available, reason = json.loads(out.strip().splitlines()[-1])
    assert not available and "pip install tensorflow-cpu" in reason and "tensorflow-rocm" in reason
    assert "inception_v3" in names and FASHION_RECIPE not in names and TEXT_RECIPE not in names


@needs_tf
def test_the_train_cli_builds_tf_configs(tmp_path: Path) -> None:
    from dlguide_core.cli.main import build_parser
    from dlguide_core.cli.train import build_config

    args = build_parser().parse_args(["train", "--recipe", TEXT_RECIPE, "--data", str(tmp_path), "--epochs", "3"])
    cfg = build_config(args)
    assert isinstance(cfg, TextClassificationConfig) and cfg.epochs == 3 and cfg.data == str(tmp_path.resolve())
    assert cfg.max_tokens == 10_000  # flags a recipe lacks, left unset, keep its defaults
    args = build_parser().parse_args(["train", "--recipe", FASHION_RECIPE, "--data", str(tmp_path),
                                      "--image-size", "64"])
    with pytest.raises(ConfigError, match="image_size"):
        build_config(args)


def test_a_photo_on_white_becomes_a_light_garment_on_black(tmp_path: Path) -> None:
    photo = np.full((90, 60), 250, np.uint8)  # a tall white photo with a dark "garment" in it
    photo[20:70, 15:45] = 30
    buffer = io.BytesIO()
    Image.fromarray(photo).convert("RGB").save(buffer, format="PNG")
    pixels = tf_inference.clothing_input(buffer.getvalue(), name="shirt.png")
    assert pixels.shape == (28, 28) and pixels.dtype == np.float32
    assert pixels[14, 14] > 0.8 and pixels[0, 0] < 0.1 and pixels[14, 1] < 0.1  # inverted and padded
    assert pixels.max() <= 1.0 and pixels.min() >= 0.0


# ------------------------------------------------------------------ jobs through the store


def _wait(store: JobStore, job_id: str, until, timeout: float = 240.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = store.get(job_id)
        found = until(job)
        if found:
            return found
        if job.status in FINAL:
            break
        time.sleep(0.05)
    log = job.log_path.read_text(errors="replace")[-3000:] if job.log_path.is_file() else "(no log)"
    pytest.fail(f"job {job_id} is {job.status} ({job.error}); waited for {until.__name__}. Log:\n{log}")


def _running_with_steps(store: JobStore):
    def running_with_steps(job) -> int:
        return len(store.steps(job.id)["step"]) if job.status == "running" else 0

    return running_with_steps


def _final(job) -> Any:
    return job if job.status in FINAL else None


def _fashion_cancel_resume(store: JobStore, data: Path) -> dict[str, Any]:
    cfg = FashionMnistConfig(data=str(data), epochs=FASHION_EPOCHS, batch_size=FASHION_BATCH)
    job = submit(store, FASHION_RECIPE, cfg)
    seen_running = _wait(store, job.id, _running_with_steps(store))
    store.request_cancel(job.id)
    cancelled = _wait(store, job.id, _final)
    steps_at_cancel = store.steps(job.id)["step"]
    resume(store, job.id)
    return {"id": job.id, "cfg": cfg, "seen_running": seen_running, "cancelled": cancelled,
            "steps_at_cancel": steps_at_cancel, "final": _wait(store, job.id, _final)}


def _text_job(store: JobStore, data: Path) -> dict[str, Any]:
    # Short sequences: average pooling over 250 positions of mostly padding would dilute these 15-word reviews.
    cfg = TextClassificationConfig(data=str(data), epochs=TEXT_EPOCHS, batch_size=TEXT_BATCH, lr=0.01,
                                   sequence_length=32)
    job = submit(store, TEXT_RECIPE, cfg)
    seen_running = _wait(store, job.id, _running_with_steps(store))
    return {"id": job.id, "cfg": cfg, "seen_running": seen_running, "final": _wait(store, job.id, _final)}


@pytest.fixture(scope="module")
def tf_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not HAS_TF:
        pytest.skip("TensorFlow is not installed (make install adds tensorflow-cpu)")
    base = tmp_path_factory.mktemp("tf_jobs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLGUIDE_HOME", str(base / "home"))
        mp.setenv("DLGUIDE_OFFLINE", "1")
        mp.setenv("DLGUIDE_MAX_JOBS", "1")
        store = JobStore()
        try:
            fashion = _fashion_cancel_resume(store, write_fashion(base / "fashion", train=FASHION_TRAIN))
            text = _text_job(store, write_imdb(base / "imdb", per_class=TEXT_PER_CLASS))
        finally:
            store.close()
    return {"home": base / "home", "fashion": fashion, "text": text}


@pytest.fixture
def jobs_home(tf_jobs: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> JobStore:
    monkeypatch.setenv("DLGUIDE_HOME", str(tf_jobs["home"]))
    store = JobStore()
    yield store
    store.close()


def _step_accuracies(home: Path, job_id: str) -> list[float]:
    with sqlite3.connect(db_path(home)) as db:
        rows = db.execute("SELECT extra FROM steps WHERE job_id = ? ORDER BY step", (job_id,)).fetchall()
    return [json.loads(extra)["accuracy"] for (extra,) in rows]


@needs_tf
@pytest.mark.slow
def test_fashion_job_streams_per_batch_metrics_while_running(tf_jobs, jobs_home: JobStore) -> None:
    fashion = tf_jobs["fashion"]
    assert fashion["seen_running"] >= 1  # step rows were readable while the job process ran
    accuracies = _step_accuracies(tf_jobs["home"], fashion["id"])
    assert accuracies and all(0.0 <= a <= 1.0 for a in accuracies)
    steps = jobs_home.steps(fashion["id"])
    assert all(np.isfinite(steps["loss"])) and all(lr == pytest.approx(0.001) for lr in steps["lr"])
    assert steps["accuracy"] == pytest.approx([100.0 * a for a in accuracies])  # what the Train page charts


@needs_tf
@pytest.mark.slow
def test_fashion_cancel_stops_at_the_next_batch_with_a_keras_checkpoint(tf_jobs) -> None:
    fashion = tf_jobs["fashion"]
    cancelled = fashion["cancelled"]
    total = FASHION_EPOCHS * FASHION_TRAIN // FASHION_BATCH
    assert cancelled.status == "cancelled" and cancelled.error is None
    assert cancelled.checkpoint.endswith(".keras")
    assert cancelled.checkpoint_step == fashion["steps_at_cancel"][-1] < total  # saved where it stopped


@needs_tf
@pytest.mark.slow
def test_fashion_resume_continues_to_the_end_and_the_model_predicts(tf_jobs, jobs_home: JobStore) -> None:
    fashion = tf_jobs["fashion"]
    job = fashion["final"]
    assert job.status == "succeeded", job.error
    total = FASHION_EPOCHS * FASHION_TRAIN // FASHION_BATCH
    assert jobs_home.steps(job.id)["step"] == list(range(1, total + 1))  # resumed exactly: no gap, no repeat
    epochs = jobs_home.epochs(job.id)
    assert [e["epoch"] for e in epochs] == list(range(FASHION_EPOCHS))
    assert epochs[-1]["top1"] > 90.0 and epochs[-1]["val_loss"] < epochs[0]["val_loss"]
    [info] = tf_inference.finished_models(jobs_home.list_jobs(), FASHION_RECIPE)
    assert info.job_id == job.id and info.evaluation["test_accuracy"] > 0.9
    assert len(info.evaluation["samples"]) == tf_fashion_mnist.GRID_SIZE
    model = tf_inference.load_tf_model(info.model_path)
    images, labels = fashion_arrays(10, np.random.default_rng(7))
    predicted = [int(np.argmax(tf_inference.classify_clothing(model, img / np.float32(255))["probs"]))
                 for img in images]
    assert np.mean(np.array(predicted) == labels) >= 0.9


@needs_tf
@pytest.mark.slow
def test_text_job_trains_through_the_store_and_ignores_unsup(tf_jobs, jobs_home: JobStore) -> None:
    text = tf_jobs["text"]
    job = text["final"]
    assert job.status == "succeeded", job.error
    assert text["seen_running"] >= 1
    assert job.class_names == ("neg", "pos")  # unsup/ did not become a third class
    steps_per_epoch = -(-int(2 * TEXT_PER_CLASS * 0.8) // TEXT_BATCH)
    assert jobs_home.steps(job.id)["step"] == list(range(1, TEXT_EPOCHS * steps_per_epoch + 1))
    assert all(0.0 <= a <= 1.0 for a in _step_accuracies(tf_jobs["home"], job.id))
    epochs = jobs_home.epochs(job.id)
    assert len(epochs) == TEXT_EPOCHS and epochs[-1]["top1"] > 90.0
    [info] = tf_inference.finished_models(jobs_home.list_jobs(), TEXT_RECIPE)
    assert info.evaluation["test_accuracy"] > 0.9


@needs_tf
@pytest.mark.slow
def test_text_export_takes_raw_strings_and_equals_model_plus_sigmoid(tf_jobs, jobs_home: JobStore) -> None:
    import keras

    text = tf_jobs["text"]
    job_dir = jobs_home.get(text["id"]).job_dir
    export = tf_inference.load_tf_model(tf_inference.finished_model(job_dir).model_path)
    state = tf_loop.read_state(job_dir)
    model = keras.models.load_model(job_dir / state["checkpoint"])
    vectorizer = tf_models.build_vectorizer(text["cfg"], json.loads((job_dir / "vocabulary.json").read_text()))
    reviews = [f"A {POSITIVE[0]} and {POSITIVE[1]} film.<br />Loved it!", f"So {NEGATIVE[0]}, {NEGATIVE[2]}!!"]
    ours = [p for _, p in tf_inference.classify_reviews(export, reviews)]
    logits = keras.ops.convert_to_numpy(model(vectorizer(np.array(reviews)))).reshape(-1)
    assert np.allclose(ours, 1.0 / (1.0 + np.exp(-logits)), atol=1e-6)
    assert ours[0] > 0.5 > ours[1]


def test_guide_standardisation_lowercases_and_strips_markup_and_punctuation() -> None:
    if not HAS_TF:
        pytest.skip("TensorFlow is not installed")
    tf = tensorflow_runtime.import_tensorflow()
    out = tensorflow_runtime.custom_standardization(tf.constant(["Great MOVIE!<br />Really, truly... 10/10"]))
    assert out.numpy()[0].decode() == "great movie really truly 1010"


# ------------------------------------------------------------------ the Classify page's TensorFlow tabs


@needs_tf
@pytest.mark.slow
def test_classify_tabs_show_the_guide_grid_and_classify_typed_reviews(tf_jobs, jobs_home: JobStore,
                                                                     tmp_path, monkeypatch) -> None:
    from tests.support.apptest import open_app

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no_weights"))  # the image tab stops early: no table there
    at = open_app()
    assert not at.exception, at.exception
    assert [t.label for t in at.tabs][:3] == ["Images · Inception v3 & checkpoints", "Clothing · Fashion-MNIST",
                                              "Movie review · IMDB"]
    assert at.selectbox(key="tf_fashion_job").value.job_id == tf_jobs["fashion"]["id"]
    assert len(at.get("plotly_chart")) == 1  # the guide's grid of test images
    [table] = at.dataframe  # the review tab's only table
    reviews = table.value
    assert list(reviews["review"]) == list(tf_text.GUIDE_REVIEWS)
    at.text_area(key="tf_review_text").set_value(f"{POSITIVE[2]} {POSITIVE[3]}\n{NEGATIVE[1]} {NEGATIVE[3]}").run()
    verdicts = at.dataframe[0].value
    assert list(verdicts["verdict"]) == ["positive", "negative"]
    assert verdicts["positive"].between(0, 1).all()


# ------------------------------------------------------------------ the Train page's TensorFlow section


def _train_form_script() -> None:
    from dlguide_core.jobs.store import JobStore
    from ui.train_form import new_job_form

    new_job_form(JobStore())


@needs_tf
def test_the_train_form_offers_tf_recipes_and_queues_a_job_on_local_data(tmp_path: Path, monkeypatch) -> None:
    """The TensorFlow recipes in the Train page's one form (issue 24): their data from the roots, their fields."""
    from streamlit.testing.v1 import AppTest

    from dlguide_core.jobs import queue
    from ui.tensorflow import TF_DOWNLOAD

    fashion = write_fashion(tmp_path / "roots" / "fashion-mnist", train=8, test=4)
    imdb = write_imdb(tmp_path / "roots" / "reviews", per_class=2)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    monkeypatch.setenv("DLGUIDE_OFFLINE", "0")  # the download choice is offered online only
    monkeypatch.setattr(queue, "dispatch", lambda store: [])  # queue only: no job process in this test
    at = AppTest.from_function(_train_form_script, default_timeout=60).run()
    assert not at.exception, at.exception
    options = [o.split(" · ")[0] for o in at.selectbox(key="train_recipe").options]
    assert {FASHION_RECIPE, TEXT_RECIPE} <= set(options)
    at.selectbox(key="train_recipe").select(FASHION_RECIPE).run()
    assert at.selectbox(key=f"train_tf_{FASHION_RECIPE}_data").options == [str(fashion), TF_DOWNLOAD]
    assert at.number_input(key=f"train_tf_{FASHION_RECIPE}_hidden_units").value == 128
    at.number_input(key=f"train_tf_{FASHION_RECIPE}_epochs").set_value(2)
    at.button(key=f"train_tf_{FASHION_RECIPE}_start").click().run()
    assert not at.error, [e.value for e in at.error]
    store = JobStore()
    [job] = store.list_jobs()
    assert (job.recipe, job.framework, job.status) == (FASHION_RECIPE, "tensorflow", "queued")
    assert job.config == {**FashionMnistConfig().__dict__, "data": str(fashion), "epochs": 2}
    at.selectbox(key="train_recipe").select(TEXT_RECIPE).run()
    assert at.selectbox(key=f"train_tf_{TEXT_RECIPE}_data").options == [str(imdb), TF_DOWNLOAD]
    assert at.number_input(key=f"train_tf_{TEXT_RECIPE}_sequence_length").value == 250
    store.close()


@needs_tf
def test_the_train_form_says_why_a_tensorflow_recipe_cannot_run(monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    reason = "TensorFlow is not installed, so the TensorFlow recipes are hidden: pip install tensorflow-cpu"
    monkeypatch.setattr(tensorflow_runtime, "tensorflow_status",
                        lambda: tensorflow_runtime.TensorFlowStatus(False, reason))
    at = AppTest.from_function(_train_form_script, default_timeout=60).run()
    at.selectbox(key="train_recipe").select(FASHION_RECIPE).run()
    assert not at.exception, at.exception
    assert reason in [i.value for i in at.info]
    assert not [b for b in at.button if b.key == f"train_tf_{FASHION_RECIPE}_start"]  # no form to start
