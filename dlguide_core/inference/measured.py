"""What this machine has measured since the server started: per-image latencies of the backends people ran
(the Classify page's results, the Compiled page's batch-1 benchmark), for help texts that say what was
measured here rather than what is true in general. In memory only, one record per backend and precision
(the latest wins); thread-safe, since every visitor's session shares it."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Measurement:
    backend: str  # registry name: torch, onnxruntime, migraphx
    precision: str
    ms_per_image: float
    where: str  # how it was measured, in words: "Classify, 3 images", "Compiled benchmark, batch 1"


_LOCK = threading.Lock()
_SEEN: dict[tuple[str, str], Measurement] = {}


def record(measurement: Measurement) -> None:
    with _LOCK:
        _SEEN[(measurement.backend, measurement.precision)] = measurement


def measurements() -> list[Measurement]:
    """The latest measurement of each backend and precision, fastest first."""
    with _LOCK:
        return sorted(_SEEN.values(), key=lambda m: m.ms_per_image)


def summary(titles: dict[str, str]) -> str:
    """The measurements in words, fastest first, with backends named by `titles` (registry name -> title)."""
    seen = measurements()
    if not seen:
        return ("Nothing measured on this machine yet: each result shows the latency its backend took here, "
                "and the Compiled inference page times the backends side by side.")
    return ("Measured on this machine since the server started (time per image, fastest first): "
            + "; ".join(f"{titles.get(m.backend, m.backend)} {m.precision} {m.ms_per_image:.1f} ms ({m.where})"
                        for m in seen) + ".")
