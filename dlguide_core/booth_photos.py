"""A booth visitor's photo, from its bytes to its answer (and, asked for, its Grad-CAM), and the answer as the booth's
HTTP answer carries it (`answer_json`: web/booth_api.py serves it, the visitor's browser draws it).

Decode, preprocess and top-k run on the image threads (vision.image_threads: a few long-lived threads, one per core,
so a crowd's photos are worked on side by side and never one at a time behind a lock); the forward runs in the
booth's worker, batched with the other visitors' photos (booth.Predictor). The photo itself never leaves the request
that brought it: nothing here keeps it, writes a file or encodes it for showing (the visitor's browser already has it
and draws it, and what the model saw, itself).
"""

from __future__ import annotations

import time

import torch
from PIL import Image

from dlguide_core.booth import Predictor, TimedPrediction, jpeg_bytes
from dlguide_core.errors import UsageError
from dlguide_core.vision.classify import top_k
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess

HEATMAP_QUALITY = 85  # the Grad-CAM overlay's JPEG quality (the crop's size: 299×299 for Inception v3)


def answer_photo(loaded: LoadedModel, predictor: Predictor, data: bytes, name: str, k: int = 5) -> TimedPrediction:
    """A visitor's photo from its bytes to its top-k: decode and preprocess on the image threads, the forward in the
    worker's batch with the other visitors' photos, top-k on the image threads again. Timed from the bytes to top-k,
    the time queued reported apart. ImageError for a bad photo, DlguideError when the worker cannot answer."""
    from dlguide_core.vision import image_threads

    start = time.perf_counter()
    batch = image_threads.run(_preprocessed, data, name, loaded)
    answer = predictor.worker.infer(batch)
    top = image_threads.run(top_k, answer.logits, loaded.class_names, k)[0]
    latency_ms = (time.perf_counter() - start) * 1000 - answer.queued_ms
    return TimedPrediction(top, latency_ms, predictor.backend, predictor.device, answer.batch_size,
                           answer.queued_ms)


def heatmap_jpeg(loaded: LoadedModel, predictor: Predictor, data: bytes, name: str, class_index: int) -> bytes:
    """The Grad-CAM of `class_index` for a visitor's photo, over what the model saw, as JPEG bytes. The backward pass
    runs in the booth's worker between two batches, so it holds up the other visitors' answers by one Grad-CAM at
    most. ImageError for a bad photo, UsageError for a class the model does not have."""
    from dlguide_core.vision import image_threads
    from dlguide_core.vision.gradcam import grad_cam

    if not 0 <= class_index < len(loaded.class_names):
        raise UsageError(f"class {class_index} is not one of the model's {len(loaded.class_names)} classes")
    image = image_threads.run(lambda: load_image(data, name=name, min_side=loaded.preset.resize))
    cam = predictor.worker.call(lambda: grad_cam(loaded, image, class_index=class_index))
    return image_threads.run(jpeg_bytes, cam.overlay, HEATMAP_QUALITY)


def answer_json(result: TimedPrediction) -> dict[str, object]:
    """The booth's HTTP answer for one photo (README, "Booth mode": these keys are a contract): the top class and its
    probability, the top-k rows, the latency (bytes to top-k, the time queued apart), the batch the photo ran in, and
    the backend and device that ran it."""
    first = result.top[0]
    return {"label": first.label, "prob": first.prob,
            "top": [{"label": p.label, "prob": p.prob, "index": p.index} for p in result.top],
            "latency_ms": round(result.latency_ms, 2), "queued_ms": round(result.queued_ms, 2),
            "batch_size": result.batch_size, "backend": result.backend, "device": result.device}


def _preprocessed(data: bytes, name: str, loaded: LoadedModel) -> torch.Tensor:
    image: Image.Image = load_image(data, name=name, min_side=loaded.preset.resize)  # never the full resolution
    return preprocess([image], loaded.preset)  # (1, 3, crop, crop)
