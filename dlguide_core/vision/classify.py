"""Batched top-k classification with softmax probabilities, and the process-wide gate on model forwards.

Every live forward of a served app goes through `forward_slot()` (`predict_logits`, Grad-CAM, the batches of an
inference worker): at most DLGUIDE_MAX_FORWARDS (default 1) run at once in a process, the others wait. On one
device, concurrent forwards only split its cores (torch already uses all of them for one) while each holds
its own activations, so four visitors' simultaneous Inception v3 forwards cost four times the memory for
no throughput (issue 18: the full app's peak under 4 uploading sessions). A served model's visitors do not queue
here one by one: its worker (inference.batching) runs all their photos as one batch, which takes one slot.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from PIL import Image

from dlguide_core.errors import ImageError
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import LoadedModel
from dlguide_core.vision.presets import preprocess


@dataclass(frozen=True)
class Prediction:
    label: str
    index: int
    prob: float

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ImageResult:
    """One input's outcome: predictions, or the one-line reason it could not be classified."""

    image: str
    top: tuple[Prediction, ...] = ()
    error: str | None = None
    decoded: Image.Image | None = field(default=None, repr=False, compare=False)  # for display

    def to_json(self) -> dict:
        if self.error is not None:
            return {"image": self.image, "error": self.error}
        return {"image": self.image, "top": [p.to_json() for p in self.top]}


def top_k(logits: torch.Tensor, class_names: Sequence[str], k: int = 5) -> list[tuple[Prediction, ...]]:
    """(B, C) logits -> per row the k most probable classes, highest first."""
    probs = torch.softmax(logits.float(), dim=1)
    values, indices = torch.topk(probs, min(k, probs.shape[1]), dim=1)
    return [
        tuple(Prediction(class_names[i], int(i), float(p)) for p, i in zip(row_p.tolist(), row_i.tolist()))
        for row_p, row_i in zip(values, indices)
    ]


DEFAULT_MAX_FORWARDS = 1  # model forwards running at once in one process (a server's visitors share it)
Logits = Callable[[torch.Tensor], torch.Tensor]  # (B, 3, H, W) preprocessed -> (B, C) float32 logits on the CPU


class ForwardGate:
    """A process-wide bound on concurrent forwards, re-entrant per thread (a forward that calls another
    gated forward, e.g. a backend dressed as a model, takes one slot, not two)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._semaphore = threading.BoundedSemaphore(slots)
        self._held = threading.local()
        self.started = 0  # forwards let through so far (inference.activity: what ran beside a benchmark)

    @contextmanager
    def __call__(self) -> Iterator[None]:
        depth = getattr(self._held, "depth", 0)
        if depth == 0:
            self._semaphore.acquire()
            self.started += 1  # under the semaphore's slot; an exact count with more slots is not needed
        self._held.depth = depth + 1
        try:
            yield
        finally:
            self._held.depth = depth
            if depth == 0:
                self._semaphore.release()


@functools.lru_cache(maxsize=1)
def forward_gate() -> ForwardGate:
    """The process's gate: DLGUIDE_MAX_FORWARDS slots (default 1; a value that is not a positive whole
    number means the default), read once per process."""
    raw = os.environ.get("DLGUIDE_MAX_FORWARDS", "").strip()
    return ForwardGate(int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_FORWARDS)


def forwards_started() -> int:
    """Live forwards this process has let through its gate so far (a benchmark's own timed runs are not gated)."""
    return forward_gate().started


def forward_slot() -> AbstractContextManager[None]:
    """`with forward_slot():` around a live model forward (waits while the process's slots are taken)."""
    return forward_gate()()


@torch.inference_mode()
def predict_logits(loaded: LoadedModel, batch: torch.Tensor) -> torch.Tensor:
    """(B, 3, H, W) preprocessed batch -> (B, C) float32 logits on the CPU, inside the forward gate."""
    device = loaded.device
    layout = torch.channels_last if device.type == "cpu" else torch.contiguous_format  # see models.load_model
    with forward_slot():
        return loaded.model(batch.to(device, memory_format=layout)).float().cpu()


def classify_images(loaded: LoadedModel, images: Sequence[Image.Image], *, k: int = 5,
                    batch_size: int = 32, logits: Logits | None = None) -> list[tuple[Prediction, ...]]:
    """RGB images -> top-k per image, run in batches of `batch_size`; `logits` runs the forward (default
    `predict_logits` here; a served page passes its model's batching worker, shared with other sessions)."""
    forward = logits or functools.partial(predict_logits, loaded)
    results: list[tuple[Prediction, ...]] = []
    for start in range(0, len(images), batch_size):
        batch = preprocess(images[start:start + batch_size], loaded.preset)
        results.extend(top_k(forward(batch), loaded.class_names, k))
    return results


def classify_sources(loaded: LoadedModel, sources: Sequence[tuple[str, bytes | str | Path]], *,
                     k: int = 5, batch_size: int = 32, logits: Logits | None = None) -> list[ImageResult]:
    """(name, bytes-or-path) pairs -> one ImageResult each, in order; bad files get an error, not an exception.

    Sources are decoded one batch at a time, each straight to the size the model's preset needs, so
    `batch_size` bounds the decoded pixels held at once (plus the small images kept for display)."""
    results: list[ImageResult] = []
    for start in range(0, len(sources), batch_size):
        results.extend(_classify_batch(loaded, sources[start:start + batch_size], k, logits))
    return results


def _classify_batch(loaded: LoadedModel, sources: Sequence[tuple[str, bytes | str | Path]],
                    k: int, logits: Logits | None = None) -> list[ImageResult]:
    results = [ImageResult(name) for name, _ in sources]
    decoded: list[tuple[int, Image.Image]] = []
    for i, (name, source) in enumerate(sources):
        try:
            decoded.append((i, load_image(source, name=name, min_side=loaded.preset.resize)))
        except ImageError as exc:
            results[i] = ImageResult(name, error=str(exc))
    if decoded:
        tops = classify_images(loaded, [img for _, img in decoded], k=k, batch_size=len(decoded), logits=logits)
        for (i, img), top in zip(decoded, tops):
            results[i] = ImageResult(results[i].image, top=top, decoded=img)
    return results
