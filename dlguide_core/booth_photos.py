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
from dlguide_core.teach import Ranked, TaughtHead, rank
from dlguide_core.vision.classify import Prediction, top_k
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess

HEATMAP_QUALITY = 85  # the Grad-CAM overlay's JPEG quality (the crop's size: 299×299 for Inception v3)


def answer_photo(loaded: LoadedModel, predictor: Predictor, data: bytes, name: str, k: int = 5,
                 head: TaughtHead | None = None) -> TimedPrediction:
    """A visitor's photo from its bytes to its top-k: decode and preprocess on the image threads, the forward in the
    worker's batch with the other visitors' photos, top-k on the image threads again. Timed from the bytes to top-k,
    the time queued reported apart. ImageError for a bad photo, DlguideError when the worker cannot answer.
    With a visitor's taught `head` (dlguide_core.teach), the same forward's features go through its one matmul and
    the taught names are ranked with the model's classes (`teach.rank`: rows are `teach.Ranked`)."""
    from dlguide_core.vision import image_threads

    start = time.perf_counter()
    batch = image_threads.run(preprocessed, data, name, loaded)
    answer = predictor.worker.infer(batch)
    if head is not None and answer.features is not None:
        top: tuple[Prediction, ...] = image_threads.run(rank, loaded.class_names, head, answer.logits,
                                                        answer.features, k)[0]
    else:
        top = image_threads.run(top_k, answer.logits, loaded.class_names, k)[0]
    latency_ms = (time.perf_counter() - start) * 1000 - answer.queued_ms
    return TimedPrediction(top, latency_ms, predictor.backend, predictor.device, answer.batch_size,
                           answer.queued_ms)


def heatmap_jpeg(loaded: LoadedModel, predictor: Predictor, data: bytes, name: str, class_index: int,
                 head: TaughtHead | None = None) -> bytes:
    """The Grad-CAM of `class_index` for a visitor's photo, over what the model saw, as JPEG bytes. The backward pass
    runs in the booth's worker between two batches, so it holds up the other visitors' answers by one Grad-CAM at
    most. With a visitor's taught `head`, C + i is its taught name i (`taught_cam`). ImageError for a bad photo,
    UsageError for a class the model does not have."""
    from dlguide_core.vision import image_threads
    from dlguide_core.vision.gradcam import grad_cam

    classes = len(loaded.class_names) + (len(head.names) if head is not None else 0)
    if not 0 <= class_index < classes:
        raise UsageError(f"class {class_index} is not one of the model's {classes} classes")
    image = image_threads.run(lambda: load_image(data, name=name, min_side=loaded.preset.resize))
    if head is not None and class_index >= len(loaded.class_names):
        overlay = predictor.worker.call(lambda: taught_cam(loaded, image, head, class_index - head.base_classes))
    else:
        overlay = predictor.worker.call(lambda: grad_cam(loaded, image, class_index=class_index)).overlay
    return image_threads.run(jpeg_bytes, overlay, HEATMAP_QUALITY)


def taught_cam(loaded: LoadedModel, image: Image.Image, head: TaughtHead, taught: int) -> Image.Image:
    """Grad-CAM of the taught name `taught`: its logit (the head's matmul on the model body's pooled features)
    differentiated at the architecture's Grad-CAM block, as gradcam.grad_cam does for the model's own classes."""
    from dlguide_core.inference.backend_base import model_body
    from dlguide_core.vision.architectures import architecture
    from dlguide_core.vision.classify import forward_slot
    from dlguide_core.vision.gradcam import cam_from, forward_with_leaf, model_view, overlay_heatmap

    layer = architecture(loaded.arch).gradcam_layer
    if layer is None:
        raise UsageError(f"{loaded.arch} names no Grad-CAM layer")
    batch = preprocess([image], loaded.preset)
    with forward_slot():
        acts, features = forward_with_leaf(model_body(loaded), batch.to(loaded.device), layer)
        with torch.enable_grad():
            score = features.flatten(1)[0].float() @ head.weight[taught].to(features.device) + head.bias[taught]
            (grads,) = torch.autograd.grad(score, acts)
    heatmap = cam_from(acts.detach(), grads, size=tuple(batch.shape[-2:]))
    return overlay_heatmap(model_view(batch, loaded.preset), heatmap)


def answer_json(result: TimedPrediction, *, taught_flags: bool = False) -> dict[str, object]:
    """The booth's HTTP answer for one photo (README, "Booth mode": these keys are a contract): the top class and its
    probability, the top-k rows, the latency (bytes to top-k, the time queued apart), the batch the photo ran in, and
    the backend and device that ran it. With `taught_flags` (a visitor of the Teach tab) each row says whether it is
    a name the visitor taught ("taught": true/false)."""
    first = result.top[0]

    def row(p: Prediction) -> dict[str, object]:
        out: dict[str, object] = {"label": p.label, "prob": p.prob, "index": p.index}
        if taught_flags:
            out["taught"] = isinstance(p, Ranked) and p.taught
        return out

    return {"label": first.label, "prob": first.prob,
            "top": [row(p) for p in result.top],
            "latency_ms": round(result.latency_ms, 2), "queued_ms": round(result.queued_ms, 2),
            "batch_size": result.batch_size, "backend": result.backend, "device": result.device}


def preprocessed(data: bytes, name: str, loaded: LoadedModel) -> torch.Tensor:
    image: Image.Image = load_image(data, name=name, min_side=loaded.preset.resize)  # never the full resolution
    return preprocess([image], loaded.preset)  # (1, 3, crop, crop)
