"""Every cached core object of the app, each with its cache key: models, device reports, prepared backends, the
booth's predictor and attract view, TensorFlow models, and the one job store.

`st.cache_resource` keys on its arguments except those named `_x`: whatever changes the cached object (a
fingerprint, a file version, a backend name) is passed under a plain name, the object itself under `_x`.
Cached objects are never mutated after caching. serve.py fills the booth's entries before the server opens.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, cast

import streamlit as st

from dlguide_core import devices
from dlguide_core.errors import StoreError
from dlguide_core.jobs.store import open_store
from dlguide_core.jobs.store_url import store_url
from dlguide_core.vision.models import LoadedModel, load_model

if TYPE_CHECKING:
    from dlguide_core.booth import AttractItem, Predictor
    from dlguide_core.jobs.store import JobStore

# ---------------------------------------------------------------- devices


# cache_resource, not cache_data: both return values nobody changes, and st.cache_data, decorated where serve.py
# imports this module before Streamlit's runtime starts, logged "No runtime found" at every start (issue 43).
@st.cache_resource(ttl=300, show_spinner=False)
def device_report(include_tensorflow: bool = False) -> devices.DeviceReport:
    return devices.collect(include_tensorflow=include_tensorflow)


def device_summary() -> str:
    """This machine's devices in one line (the sidebar); not dlguide_core.booth.device_label, one device's name."""
    return devices.summary_label(device_report())


# ---------------------------------------------------------------- models


@st.cache_resource(show_spinner="Loading model…", max_entries=4)
def cached_model(weights: str, version: str = "") -> LoadedModel:
    """One LoadedModel per weights source and checkpoint file version; never mutated after caching.

    `version` (file_version) is a plain-named argument: it is part of the cache key (a `_name` would not be)."""
    return load_model(weights)


def file_version(weights: str) -> str:
    """What changes when a checkpoint is rewritten at the same path: mtime (ns), size and inode
    (save_checkpoint writes a temp file then os.replace()s it, so even a same-tick rewrite is a new inode)."""
    path = Path(weights)
    if weights in ("imagenet", "none") or not path.is_file():
        return ""
    stat = path.stat()
    return f"{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}"


def get_model(weights: str) -> LoadedModel:
    return cached_model(weights, file_version(weights))


@st.cache_resource(show_spinner="Loading the TensorFlow model…", max_entries=4)
def cached_tf_model(path: str, version: float):
    """One Keras model per file (and mtime, so a rewritten file reloads); never mutated after caching."""
    from dlguide_core.tf.inference import load_tf_model

    return load_tf_model(path)


# ---------------------------------------------------------------- prepared backends (Classify, Compiled)


@st.cache_resource(show_spinner="Preparing the backend…", max_entries=8)
def _cached_backend(name: str, fingerprint: str, source: str, options, batch_size: int, _loaded: LoadedModel):
    from dlguide_core.inference.registry import prepare_backend

    return prepare_backend(name, _loaded, batch_size=batch_size, options=options)


def get_backend(name: str, loaded: LoadedModel, options=None, batch_size: int = 1, progress=None):
    """A prepared backend (ONNX session, compiled MIGraphX program…), one per model, options and batch size;
    never mutated after caching. With `progress(message, fraction)`, the slow disk-cached steps (export,
    MIGraphX compile) run first outside the cache, since a cached function cannot draw progress."""
    from dlguide_core.inference.backend_base import BackendOptions
    from dlguide_core.inference.registry import precompile

    options = options or BackendOptions()
    if progress is not None:
        precompile(name, loaded, batch_size=batch_size, options=options, progress=progress)
    return _cached_backend(name, loaded.fingerprint, loaded.source, options, batch_size, loaded)


# ---------------------------------------------------------------- the booth (warmed by serve.py)


@st.cache_resource(show_spinner="Preparing the booth model (a one-time compile)…", max_entries=4)
def _cached_booth_predictor(fingerprint: str, source: str, choice: str, _loaded: LoadedModel) -> Predictor:
    from dlguide_core.booth import fastest_predictor

    return fastest_predictor(_loaded)


def booth_predictor(loaded: LoadedModel) -> Predictor:
    """The booth's predictor for `loaded`: the fastest available backend, prepared once per model."""
    from dlguide_core.booth import backend_choice

    return _cached_booth_predictor(loaded.fingerprint, loaded.source, backend_choice(), loaded)


@st.cache_resource(show_spinner="Classifying the sample photos…", max_entries=8)
def _cached_attract_items(fingerprint: str, backend: str, _loaded: LoadedModel,
                          _predictor: Predictor) -> list[AttractItem]:
    from dlguide_core.booth import attract_items as compute

    return compute(_loaded, _predictor)


def attract_items(loaded: LoadedModel, predictor: Predictor) -> list[AttractItem]:
    """The bundled samples with their predictions, computed once per model and backend."""
    return _cached_attract_items(loaded.fingerprint, predictor.backend, loaded, predictor)


@st.cache_resource(show_spinner=False, max_entries=8)
def _cached_worker(fingerprint: str, backend: str, precision: str, _run_with: LoadedModel):
    from dlguide_core.inference.batching import BatchLimits, InferenceWorker
    from dlguide_core.vision.classify import forward_slot, predict_logits

    return InferenceWorker(functools.partial(predict_logits, _run_with),
                           BatchLimits.from_env(on_gpu=_run_with.device.type != "cpu"), name="classify",
                           gate=forward_slot)


def classify_logits(run_with: LoadedModel, backend: str, precision: str):
    """The forward the Classify page runs its images through: one batching worker per model and backend, shared
    by every session (their images go through the model together), as the booth's predictor is."""
    worker = _cached_worker(run_with.fingerprint, backend, precision, run_with)
    return lambda batch: worker.infer(batch).logits


def classify_task(run_with: LoadedModel, backend: str, precision: str):
    """Run a task (the Teach flow's forwards: ui.teach) in that same shared worker, alone, between two batches."""
    return _cached_worker(run_with.fingerprint, backend, precision, run_with).call


# ---------------------------------------------------------------- the job store


@st.cache_resource(show_spinner=False)
def job_store(url: str) -> JobStore:
    """One JobStore connection per store URL (it locks internally, and reconnects after an outage)."""
    return open_store(url)


class _PageStore:
    """The cached store for a page: a store that cannot be used (server away, read-only, full, newer
    schema...) shows its one line (password masked) and stops this run, never a traceback; the next
    rerun tries again, so the page recovers by itself. It answers every JobStore attribute, so
    app_job_store gives it to the type checker as the JobStore it stands for: pages' calls are checked."""

    def __init__(self, url: str) -> None:
        self._url = url

    def __getattr__(self, name: str):
        try:
            attr = getattr(job_store(self._url), name)
        except StoreError as exc:
            _stop_on(exc)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            try:
                return attr(*args, **kwargs)
            except StoreError as exc:
                _stop_on(exc)

        return call


def _stop_on(exc: StoreError) -> NoReturn:
    st.error(str(exc))
    st.stop()


def app_job_store() -> JobStore:
    """The app's job store (DLGUIDE_STORE_URL), created on first use (the Train page)."""
    try:
        return cast("JobStore", _PageStore(store_url().raw))
    except StoreError as exc:  # a DLGUIDE_STORE_URL that cannot be read (a keyword string, `?PASSWORD=`): one line
        _stop_on(exc)


def existing_job_store() -> JobStore | None:
    """The app's job store; None when no job was ever created (the booth and a look-up must not create
    one) or when it cannot be opened (callers read it quietly)."""
    try:
        url = store_url()
    except StoreError:  # a DLGUIDE_STORE_URL that cannot be read: as a store that cannot be opened
        return None
    if url.path is not None and not url.path.is_file():
        return None
    try:
        return job_store(url.raw)
    except StoreError:
        return None


# The booth's loss ticker: every open booth tab redraws it every 5 s (ui.booth.loss_ticker)
TICKER_POINTS = 400  # its curve, downsampled (min and max per bucket): a long run's chart costs what a short one's does
TICKER_READ_S = 4.0  # one store read per this long, shared by every open tab


@st.cache_resource(ttl=TICKER_READ_S, max_entries=8, show_spinner=False)  # its lists are only read
def ticker_curve(url: str, job_id: str) -> tuple[list[float], list[float]]:
    """A running job's (step, loss) curve for the booth's ticker, downsampled and shared by every open tab. Each tab
    used to read every step of the job and draw every point every 5 s: beside a training job an idle booth tab cost
    1.3-2.1 % of a core, and more as the run grew (bench/bench_booth_idle.py --training). StoreError when the store
    is away (then nothing is cached)."""
    from dlguide_core.training.metrics import downsample

    cols = job_store(url).steps(job_id, extras=False)
    steps, losses = downsample(cols["step"], cols["loss"], TICKER_POINTS)
    return steps.tolist(), losses.tolist()


@st.cache_resource(show_spinner=False)
def scheduler_watcher(url: str):
    """One background sync of the schedulers (Slurm, Ray) per job store: pages read its last report."""
    from dlguide_core.jobs.executors.tracking import Watcher

    return Watcher(job_store(url))


def app_scheduler_watcher():
    """The watcher of the app's job store (app_job_store); a store that cannot be opened stops the run in one
    line, as app_job_store does."""
    try:
        return scheduler_watcher(store_url().raw)
    except StoreError as exc:
        _stop_on(exc)
