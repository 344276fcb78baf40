"""Booth mode logic: the predictor the booth uses, timed predictions, idle timing, the attract view.

pages/booth.py is the UI; everything it decides (which backend, when a visitor has
gone, which sample the attract view shows) is decided here, without streamlit.
Visitor images are only ever held in memory: nothing in this module writes a file.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from PIL import Image

from dlguide_core.errors import DlguideError
from dlguide_core.inference.batching import BatchLimits, InferenceWorker
from dlguide_core.vision.classify import Prediction, forward_slot, top_k
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess
from dlguide_core.vision.samples import bundled_samples

if TYPE_CHECKING:
    from dlguide_core.inference.backend_base import Backend, Outputs

DEFAULT_IDLE_S = 60.0
ATTRACT_PERIOD_S = 5.0  # seconds each sample stays on the attract view
# The attract view's sample, sent inline with every tick of every open tab: its long side at most this, JPEG quality
ATTRACT_SIDE, ATTRACT_QUALITY = 360, 85

Logits = Callable[[torch.Tensor], torch.Tensor]  # (B, 3, H, W) preprocessed -> (B, C) float32 logits
BothHeads = Callable[[torch.Tensor], "Outputs"]  # the same forward giving the pooled features too (issue 44)


@dataclass(frozen=True)
class Predictor:
    """How the booth runs the model: a backend name, the device it runs on, and its forward.

    One predictor is shared by every visitor; its `worker` (inference.batching) runs the forward for all of them:
    the photos of visitors who tap at the same time go through the model as one batch, in one thread that holds
    one of the process's forward slots per batch (DLGUIDE_MAX_FORWARDS), so visitors never queue one by one and
    the server's memory stays flat (one batch's activations at a time).
    """

    backend: str
    device: str
    logits: Logits = field(repr=False, compare=False)
    why: str = ""  # how the backend was chosen (the measured ranking, when there was one)
    on_gpu: bool = False  # where the forward runs (its largest batch depends on it: settings.max_batch)
    # The backend's run_features: when given, the worker runs it instead of `logits`, and every answer carries the
    # photo's pooled features beside its logits (one forward, both heads: the Teach tab's, dlguide_core.booth_teach)
    features: BothHeads | None = field(default=None, repr=False, compare=False)
    worker: InferenceWorker = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        worker = InferenceWorker(self.features or self.logits, BatchLimits.from_env(on_gpu=self.on_gpu),
                                 name="booth", gate=forward_slot)
        object.__setattr__(self, "worker", worker)  # frozen: set once, here


@dataclass(frozen=True)
class TimedPrediction:
    top: tuple[Prediction, ...]
    # preprocessing (from the photo's bytes, for a visitor's: booth_photos.answer_photo) + the forward of its batch +
    # softmax/top-k, not the time queued
    latency_ms: float
    backend: str
    device: str
    batch_size: int = 1  # the photos (this visitor's and others') in the forward that answered it
    queued_ms: float = 0.0  # waiting for that forward to start (other visitors' batches before it)


@dataclass(frozen=True)
class AttractItem:
    name: str
    image: Image.Image = field(repr=False, compare=False)
    top: tuple[Prediction, ...]
    jpeg: bytes = field(default=b"", repr=False, compare=False)  # `image` encoded once: every tick shows these


def jpeg_bytes(image: Image.Image, quality: int = 90) -> bytes:
    """`image` as JPEG bytes, for a picture shown many times (encoded once, never per rerun)."""
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def idle_seconds() -> float:
    """DLGUIDE_KIOSK_IDLE_S (seconds without interaction before the reset), default 60."""
    raw = os.environ.get("DLGUIDE_KIOSK_IDLE_S", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_IDLE_S
    except ValueError:
        return DEFAULT_IDLE_S
    return value if value > 0 else DEFAULT_IDLE_S


def idle_check_s(idle_s: float) -> float:
    """How often an open screen with a visitor's photo checks for the idle reset: a sixth of the idle time, at
    least 1 s (a 60 s reset comes 60-70 s after the last tap). Each check is a script run in the server for every
    open tab, so a check a second (the old countdown) made idle tabs cost the visitors' throughput."""
    return max(1.0, idle_s / 6)


def seconds_left(last_active: float, now: float, idle_s: float) -> float:
    """Seconds until the idle reset (0 once it is due)."""
    return max(0.0, idle_s - (now - last_active))


def attract_index(now: float, count: int, period_s: float = ATTRACT_PERIOD_S) -> int:
    """Which of `count` samples the attract view shows at wall time `now` (all booth screens agree)."""
    return int(now // period_s) % count if count > 0 else 0


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return f"GPU · {torch.cuda.get_device_name(device)}"
    return f"CPU · {os.cpu_count()} cores"


def backend_choice() -> str:
    """DLGUIDE_KIOSK_BACKEND: "auto" (default: the fastest available here) or a backend name."""
    return os.environ.get("DLGUIDE_KIOSK_BACKEND", "").strip().lower() or "auto"


def fastest_predictor(loaded: LoadedModel) -> Predictor:
    """The kiosk's predictor: the fastest available compiled backend (or DLGUIDE_KIOSK_BACKEND's), prepared once.

    Preparing may export the model to ONNX under DLGUIDE_HOME/exports once per weights
    (a cache of the model, never of visitor data).
    """
    from dlguide_core.inference import registry, specs

    choice = backend_choice()
    why = f"DLGUIDE_KIOSK_BACKEND={choice}"
    if choice == "auto":
        backend, why = fastest_measured(loaded)
    elif choice in specs.NAMES:
        backend = registry.prepare_backend(choice, loaded)
    else:
        raise DlguideError(f"DLGUIDE_KIOSK_BACKEND must be auto or one of {', '.join(specs.NAMES)}, "
                           f"not {choice!r}")
    return Predictor(f"{variant_label(backend)} · {backend.provider}", backend_device(backend, loaded),
                     backend.run, why=why, on_gpu=runs_on_gpu(backend), features=backend.run_features)


RANKING_WARMUP, RANKING_ITERS = 1, 3  # a booth start pays ~5 forwards per contender, once per process


def choice_rule() -> str:
    """The rule `fastest_predictor` follows, in words, for the booth info and the Devices page (from the ranking
    declared in `specs`, so a new backend's place is stated where it is declared)."""
    from dlguide_core.inference.choice import AGREEMENT_MIN, CHECK_VAL_PHOTOS
    from dlguide_core.inference.specs import SPEC, Ranked, label, ranking

    def variant(name: str, ranked: Ranked) -> str:
        return f"{label(name, ranked.target)} {ranked.precision}" + (f" ({ranked.when})" if ranked.when else "")

    def on_gpu(name: str) -> str:  # "MIGraphX (GPU)", "ONNX Runtime on a GPU"
        return label(name, "gpu") if dict(SPEC[name].target_labels).get("gpu") else f"{label(name)} on a GPU"

    ranked = ranking()
    gpu = ", then ".join(on_gpu(n) for n, r in ranked if r.target == "gpu" and not r.timed)
    cpu_pick = next(variant(n, r) for n, r in ranked if r.target == "cpu" and not r.timed)
    timed = [(n, r) for n, r in ranked if r.timed]
    checked = " and ".join(variant(n, r) for n, r in timed if r.checked) or "none"
    return (f"Booth backend: DLGUIDE_KIOSK_BACKEND when set; else a compiled GPU runtime when there is one "
            f"(in this order: {gpu}); on a CPU, {cpu_pick} and each of {', '.join(variant(n, r) for n, r in timed)} "
            f"that runs here are timed on one sample photo ({RANKING_WARMUP} warm-up + {RANKING_ITERS} runs) and "
            f"the lowest p50 wins, among the variants that agree with eager PyTorch: {checked} only where its top-1 "
            f"matches eager on at least {AGREEMENT_MIN:.0%} of the bundled photos and up to {CHECK_VAL_PHOTOS} val "
            f"photos under the data roots; the other fp32 ones give its answers (MIGraphX is checked when it "
            f"compiles). Eager PyTorch when nothing else runs.")


def variant_label(backend: Backend) -> str:
    """"ONNX Runtime", "ONNX Runtime int8", "MIGraphX (CPU)": the label plus any reduced precision."""
    precision = backend.options.precision
    return backend.label if precision == "fp32" else f"{backend.label} {precision}"


def fastest_measured(loaded: LoadedModel) -> tuple[Backend, str]:
    """`choice.prepare_fastest`, then, on a CPU host, the contenders it names (ORT int8 where it agrees with
    eager, MIGraphX (CPU), ...: `choice.cpu_contenders`) prepared and timed on one sample photo: the fastest p50
    wins (`choice_rule`). Returns it and the ranking."""
    from dlguide_core.inference import backend_base, choice, registry

    best, fastest = choice.prepare_fastest(loaded), choice.fastest_available(loaded)
    contenders = choice.cpu_contenders(fastest) if best.name == fastest.name else []
    if not contenders:
        return best, f"{best.label}: {fastest.reason}"
    batch = backend_base.sample_batch(loaded, 1)  # (1, 3, crop, crop)
    timed, left_out = [(measure_p50_ms(best, batch), best)], []
    for contender in contenders:
        try:
            other = registry.prepare_backend(contender.name, loaded, options=contender.options)
        except DlguideError:
            continue  # a contender that cannot prepare here simply does not run
        if contender.checked:
            photos = choice.check_photos()
            agree = choice.top1_agreement(loaded, other, photos)
            if agree < choice.AGREEMENT_MIN:
                left_out.append(f"{variant_label(other)} (top-1 agrees on {agree:.1%} of {len(photos)} photos)")
                continue
        first_ms = measure_once_ms(other, batch)
        # Clearly slower on its first run (e.g. a cpu-target .mxr loaded in a new process: ~100x): no more runs.
        timed.append((first_ms if first_ms > 3 * timed[0][0] else measure_p50_ms(other, batch), other))
    timed.sort(key=lambda pair: pair[0])
    ranking = " < ".join(f"{variant_label(b)} {ms:.1f} ms" for ms, b in timed)
    dropped = f"; left out: {', '.join(left_out)}" if left_out else ""
    return timed[0][1], f"measured p50 on one photo: {ranking}{dropped}"


def measure_once_ms(backend: Backend, batch: torch.Tensor) -> float:
    start = time.perf_counter()
    backend.run(batch)
    return (time.perf_counter() - start) * 1000


def measure_p50_ms(backend: Backend, batch: torch.Tensor) -> float:
    from dlguide_core.inference.benchmark import latency_stats, time_runs

    times = time_runs(lambda: backend.run(batch), warmup=RANKING_WARMUP, iters=RANKING_ITERS)
    return latency_stats(times, len(batch))["p50_ms"]


def runs_on_gpu(backend: Backend) -> bool:
    """Whether a prepared backend's forward runs on a GPU here."""
    return backend.on_gpu and torch.cuda.is_available()


def backend_device(backend: Backend, loaded: LoadedModel) -> str:
    """Where a prepared backend runs, in words: "CPU · 2 cores" or "GPU · <name>"."""
    return device_label(loaded.device if runs_on_gpu(backend) else torch.device("cpu"))


def predict_timed(loaded: LoadedModel, predictor: Predictor, image: Image.Image, k: int = 5) -> TimedPrediction:
    """Top-k of one image with `predictor`, in a batch with the other visitors' photos of the moment; timed from
    preprocessing to top-k, the time queued for the worker reported apart."""
    start = time.perf_counter()
    batch = preprocess([image], loaded.preset)  # (1, 3, crop, crop), in the visitor's own thread
    answer = predictor.worker.infer(batch)
    top = top_k(answer.logits, loaded.class_names, k)[0]
    latency_ms = (time.perf_counter() - start) * 1000 - answer.queued_ms
    return TimedPrediction(top, latency_ms, predictor.backend, predictor.device, answer.batch_size,
                           answer.queued_ms)


def attract_items(loaded: LoadedModel, predictor: Predictor, k: int = 5) -> list[AttractItem]:
    """The bundled sample photos with their predictions, in display order."""
    items = []
    for name, path in bundled_samples().items():
        image = load_image(path)
        shown = image.copy()
        shown.thumbnail((ATTRACT_SIDE, ATTRACT_SIDE))  # its column is about this wide: less to send each tick
        items.append(AttractItem(name, image, predict_timed(loaded, predictor, image, k).top,
                                 jpeg_bytes(shown, ATTRACT_QUALITY)))
    return items


def booth_weights(*, fetch: bool = False, say: Callable[[str], None] | None = None) -> str:
    """The booth's weights: DLGUIDE_KIOSK_WEIGHTS's checkpoint when it is set (`chosen_weights`); else "imagenet"
    when its file is cached (or, with `fetch`, downloadable now: serve.py before the port opens), else "none", the
    untrained model (the page says so)."""
    from dlguide_core.booth_model import chosen_weights
    from dlguide_core.errors import WeightsUnavailable
    from dlguide_core.vision.models import fetch_imagenet_weights, imagenet_weights_path

    chosen = chosen_weights()
    if chosen is not None:
        return chosen
    if imagenet_weights_path().is_file():
        return "imagenet"
    if not fetch:
        return "none"
    tell = say or (lambda message: None)
    tell(f"the ImageNet weights are not cached at {imagenet_weights_path()}: downloading them")
    try:
        fetch_imagenet_weights()
        return "imagenet"
    except WeightsUnavailable as exc:
        tell(f"{exc} The booth runs untrained until then.")
        return "none"
