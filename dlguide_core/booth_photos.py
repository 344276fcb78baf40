"""A booth visitor's photo, from its bytes to its answer and the pictures the booth shows with it.

Decode, preprocess, top-k and the pictures run on the image threads (vision.image_threads: not in the visitor's new
script thread each time); the forward runs in the booth's worker, batched with the other visitors' photos
(booth.Predictor). Visitor images are only ever held in memory: nothing here writes a file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from PIL import Image

from dlguide_core.booth import Predictor, TimedPrediction, jpeg_bytes
from dlguide_core.vision.classify import Prediction, top_k
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess

# A visitor's photo and model view as "how it works" shows them, inline in the page's HTML: the long side at most
# this (a third of a booth screen), JPEG quality this
SHOWN_SIDE, SHOWN_QUALITY = 400, 85


@dataclass(frozen=True)
class AnsweredPhoto:
    """A visitor's photo answered: the image at the model's size (never the full resolution), its prediction, and
    the two pictures the booth shows, JPEG-encoded once: the photo and what the model saw (the very tensor it ran
    on, denormalised)."""

    image: Image.Image = field(repr=False, compare=False)
    result: TimedPrediction
    photo_jpeg: bytes = field(repr=False, compare=False)
    view_jpeg: bytes = field(repr=False, compare=False)


def answer_photo(loaded: LoadedModel, predictor: Predictor, data: bytes, name: str, k: int = 5) -> AnsweredPhoto:
    """A visitor's photo from its bytes to its answer: decode and preprocess, then top-k and the pictures, on the
    image threads (vision.image_threads: not in the visitor's new script thread each time); the forward in the
    worker's batch with the other visitors' photos. Timed from the bytes to top-k, the time queued reported apart.
    ImageError for a bad photo, DlguideError when the worker cannot answer."""
    from dlguide_core.vision import image_threads

    start = time.perf_counter()
    image, batch = image_threads.run(_decoded, data, name, loaded)
    answer = predictor.worker.infer(batch)
    top, topped_at, photo_jpeg, view_jpeg = image_threads.run(_shown, answer.logits, image, batch, loaded, k)
    latency_ms = (topped_at - start) * 1000 - answer.queued_ms
    result = TimedPrediction(top, latency_ms, predictor.backend, predictor.device, answer.batch_size,
                             answer.queued_ms)
    return AnsweredPhoto(image, result, photo_jpeg, view_jpeg)


def _decoded(data: bytes, name: str, loaded: LoadedModel) -> tuple[Image.Image, torch.Tensor]:
    image = load_image(data, name=name, min_side=loaded.preset.resize)  # never the full resolution
    return image, preprocess([image], loaded.preset)  # (1, 3, crop, crop)


def _shown(logits: torch.Tensor, image: Image.Image, batch: torch.Tensor, loaded: LoadedModel,
           k: int) -> tuple[tuple[Prediction, ...], float, bytes, bytes]:
    """Top-k, when it was known (perf_counter: the answer's timing ends there), and the two pictures."""
    from dlguide_core.vision.gradcam import model_view

    top = top_k(logits, loaded.class_names, k)[0]
    topped_at = time.perf_counter()
    photo = image.copy()
    photo.thumbnail((SHOWN_SIDE, SHOWN_SIDE))  # a third of the screen at most: less to encode, send and draw
    return (top, topped_at, jpeg_bytes(photo, SHOWN_QUALITY),
            jpeg_bytes(model_view(batch, loaded.preset), SHOWN_QUALITY))
