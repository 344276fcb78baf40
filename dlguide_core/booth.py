"""Booth mode logic: the predictor a kiosk uses, timed predictions, idle timing, the attract view.

pages/kiosk.py is the UI; everything it decides (which backend, when a visitor has
gone, which sample the attract view shows) is decided here, without streamlit.
Visitor images are only ever held in memory: nothing in this module writes a file.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from PIL import Image

from dlguide_core.errors import DlguideError
from dlguide_core.vision.classify import Prediction, forward_slot, top_k
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess
from dlguide_core.vision.samples import bundled_samples

if TYPE_CHECKING:
    from dlguide_core.inference.backend_base import Backend

DEFAULT_IDLE_S = 60.0
ATTRACT_PERIOD_S = 5.0  # seconds each sample stays on the attract view

Logits = Callable[[torch.Tensor], torch.Tensor]  # (B, 3, H, W) preprocessed -> (B, C) float32 logits


@dataclass(frozen=True)
class Runner:
    """How the kiosk runs the model: a backend name, the device it runs on, and its forward.

    One runner is shared by every visitor; `lock` lets one forward (or Grad-CAM) run at a
    time: concurrent forwards on one device only fight over its cores and multiply peak
    memory, so queueing keeps latency fair and the server's memory flat all day.
    """

    backend: str
    device: str
    logits: Logits = field(repr=False, compare=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    why: str = ""  # how the backend was chosen (the measured ranking, when there was one)


@dataclass(frozen=True)
class TimedPrediction:
    top: tuple[Prediction, ...]
    latency_ms: float  # preprocessing + forward + softmax/top-k of this one image (not time queued for the lock)
    backend: str
    device: str


@dataclass(frozen=True)
class AttractItem:
    name: str
    image: Image.Image = field(repr=False, compare=False)
    top: tuple[Prediction, ...]


def idle_seconds() -> float:
    """DLGUIDE_KIOSK_IDLE_S (seconds without interaction before the reset), default 60."""
    raw = os.environ.get("DLGUIDE_KIOSK_IDLE_S", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_IDLE_S
    except ValueError:
        return DEFAULT_IDLE_S
    return value if value > 0 else DEFAULT_IDLE_S


def seconds_left(last_active: float, now: float, idle_s: float) -> float:
    """Seconds until the idle reset (0 once it is due)."""
    return max(0.0, idle_s - (now - last_active))


def is_idle(last_active: float, now: float, idle_s: float) -> bool:
    return seconds_left(last_active, now, idle_s) <= 0.0


def attract_index(now: float, count: int, period_s: float = ATTRACT_PERIOD_S) -> int:
    """Which of `count` samples the attract view shows at wall time `now` (all kiosk screens agree)."""
    return int(now // period_s) % count if count > 0 else 0


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"GPU · {torch.cuda.get_device_name(device)}"
    return f"CPU · {os.cpu_count()} cores"


def backend_choice() -> str:
    """DLGUIDE_KIOSK_BACKEND: "auto" (default: the fastest available here) or a backend name."""
    return os.environ.get("DLGUIDE_KIOSK_BACKEND", "").strip().lower() or "auto"


def fastest_runner(loaded: LoadedModel) -> Runner:
    """The kiosk's predictor: the fastest available compiled backend (or DLGUIDE_KIOSK_BACKEND's), prepared once.

    Preparing may export the model to ONNX under DLGUIDE_HOME/exports once per weights
    (a cache of the model, never of visitor data).
    """
    from dlguide_core.inference import registry

    choice = backend_choice()
    why = f"DLGUIDE_KIOSK_BACKEND={choice}"
    if choice == "auto":
        backend, why = fastest_measured(loaded)
    elif choice in registry.BACKENDS:
        backend = registry.prepare_backend(choice, loaded)
    else:
        raise DlguideError(f"DLGUIDE_KIOSK_BACKEND must be auto or one of {', '.join(registry.BACKENDS)}, "
                           f"not {choice!r}")
    return Runner(f"{variant_label(backend)} · {backend.provider}", provider_device(backend.provider, loaded),
                  backend.run, why=why)


RANKING_WARMUP, RANKING_ITERS = 1, 3  # a booth start pays ~5 forwards per contender, once per process


def choice_rule() -> str:
    """The rule `fastest_runner` follows, in words, for the booth info and the Devices page."""
    from dlguide_core.inference.choice import AGREEMENT_MIN, CHECK_VAL_PHOTOS

    return (f"Booth backend: DLGUIDE_KIOSK_BACKEND when set; else a compiled GPU runtime when there is one "
            f"(MIGraphX on an AMD GPU, then ONNX Runtime on a GPU provider, then PyTorch on the GPU); on a CPU, "
            f"ONNX Runtime fp32, ONNX Runtime int8 and MIGraphX (CPU) fp32 are each timed on one sample photo "
            f"({RANKING_WARMUP} warm-up + {RANKING_ITERS} runs) and the lowest p50 wins, among the variants that "
            f"agree with eager PyTorch: fp32 ones give its answers (MIGraphX is checked when it compiles), int8 "
            f"only where its top-1 matches eager on at least {AGREEMENT_MIN:.0%} of the bundled photos and up to "
            f"{CHECK_VAL_PHOTOS} val photos under the data roots. Eager PyTorch when nothing else runs.")


def variant_label(backend: Backend) -> str:
    """"ONNX Runtime", "ONNX Runtime int8", "MIGraphX (CPU)": the label plus any reduced precision."""
    precision = backend.options.precision
    return backend.label if precision == "fp32" else f"{backend.label} {precision}"


def fastest_measured(loaded: LoadedModel) -> tuple[Backend, str]:
    """`choice.prepare_fastest`, then, on a CPU host, the contenders it names (ORT int8 where it agrees with
    eager, MIGraphX (CPU)) prepared and timed on one sample photo: the fastest p50 wins (`choice_rule`).
    Returns it and the ranking."""
    from dlguide_core.inference import backend_base, choice, registry

    best = choice.prepare_fastest(loaded)
    contenders = choice.cpu_contenders(choice.fastest_available(loaded)) if best.name == "onnxruntime" else []
    if not contenders:
        return best, f"{best.label}: {choice.fastest_available(loaded).reason}"
    batch = backend_base.sample_batch(loaded, 1)  # (1, 3, crop, crop)
    timed, left_out = [(measure_p50_ms(best, batch), best)], []
    for contender in contenders:
        try:
            other = registry.prepare_backend(contender.name, loaded, options=contender.options)
        except DlguideError:
            continue  # a contender that cannot prepare here simply does not run
        if contender.options.precision != "fp32":
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


def provider_device(provider: str, loaded: LoadedModel) -> str:
    """Where a backend's provider runs, in words: "CPU · 2 cores" or "GPU · <name>"."""
    on_cpu = provider.lower().startswith(("cpu", "migraphx:cpu")) or provider == "ref"
    return device_name(torch.device("cpu") if on_cpu or not torch.cuda.is_available() else loaded.device)


def predict_timed(loaded: LoadedModel, runner: Runner, image: Image.Image, k: int = 5) -> TimedPrediction:
    """Top-k of one image with `runner`, timed from preprocessing to top-k."""
    start = time.perf_counter()
    batch = preprocess([image], loaded.preset)  # (1, 3, crop, crop)
    prepared = time.perf_counter()
    with runner.lock, forward_slot():  # the process-wide gate too: the full app's other pages share it
        began = time.perf_counter()
        logits = runner.logits(batch)
    top = top_k(logits, loaded.class_names, k)[0]
    latency_ms = ((prepared - start) + (time.perf_counter() - began)) * 1000  # time queued for the lock excluded
    return TimedPrediction(top, latency_ms, runner.backend, runner.device)


def attract_items(loaded: LoadedModel, runner: Runner, k: int = 5) -> list[AttractItem]:
    """The bundled sample photos with their predictions, in display order."""
    items = []
    for name, path in bundled_samples().items():
        image = load_image(path)
        items.append(AttractItem(name, image, predict_timed(loaded, runner, image, k).top))
    return items
