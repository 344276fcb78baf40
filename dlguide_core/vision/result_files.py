"""Results as files people take away: classification results as CSV rows (image, rank, label, index,
probability, error, then what produced them: weights, backend, precision, latency_ms) and as JSON records (one
per image, the shape `classify --json` prints), evaluation results as JSON.

`classify_timed` classifies and says what produced the results (`RunInfo`); `result_record` is the one JSON
record per image, for the CLI and the Classify page's download alike."""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlguide_core import csv_cells
from dlguide_core.vision.classify import ImageResult, Logits, classify_sources
from dlguide_core.vision.models import LoadedModel

RESULT_COLUMNS = ("image", "rank", "label", "index", "probability")
RUN_COLUMNS = ("weights", "backend", "precision", "latency_ms")  # after "error" in the CSV (columns are added)


@dataclass(frozen=True)
class RunInfo:
    """What produced a set of results: the weights asked for (imagenet, none or a checkpoint path), the backend
    (its registry name: torch, onnxruntime, migraphx), the precision, and the wall time per image (decoding,
    preprocessing, forward and top-k, averaged over the images classified together)."""

    weights: str
    backend: str
    precision: str
    latency_ms: float

    def to_json(self) -> dict[str, Any]:
        return {"weights": self.weights, "backend": self.backend, "precision": self.precision,
                "latency_ms": round(self.latency_ms, 3)}


def classify_timed(loaded: LoadedModel, sources: Sequence[tuple[str, bytes | str | Path]], *, weights: str,
                   backend: str, precision: str = "fp32", k: int = 5,
                   batch_size: int = 32, logits: Logits | None = None) -> tuple[list[ImageResult], RunInfo]:
    """`classify_sources`, timed: the results and the RunInfo that goes with them."""
    start = time.perf_counter()
    results = classify_sources(loaded, sources, k=k, batch_size=batch_size, logits=logits)
    per_image_ms = (time.perf_counter() - start) * 1000 / max(1, len(sources))
    return results, RunInfo(weights, backend, precision, per_image_ms)


def result_record(result: ImageResult, run: RunInfo) -> dict[str, Any]:
    """One image's JSON record: {"image", "top": [{"label", "index", "prob"}, ...]} or {"image", "error"},
    then "weights", "backend", "precision", "latency_ms" (null for an image that could not be classified: no
    forward ran for it)."""
    return {**result.to_json(), **run.to_json(), **({"latency_ms": None} if result.error is not None else {})}


def result_rows(results: Sequence[ImageResult]) -> list[dict[str, Any]]:
    """One row per (image, rank); an image that could not be read keeps one row with its error."""
    rows: list[dict[str, Any]] = []
    for result in results:
        if result.error is not None:
            rows.append({"image": result.image, "rank": None, "label": None, "index": None, "probability": None,
                         "error": result.error})
            continue
        rows += [{"image": result.image, "rank": rank, "label": p.label, "index": p.index, "probability": p.prob}
                 for rank, p in enumerate(result.top, start=1)]
    return rows


def results_csv(results: Sequence[ImageResult], run: RunInfo) -> str:
    """One row per (image, rank), each with what produced it; text cells that a spreadsheet would run as
    formulas are escaped."""
    out = io.StringIO()
    writer = csv_cells.writer(out, lineterminator="\n")
    columns = [*RESULT_COLUMNS, "error", *RUN_COLUMNS]
    writer.writerow(columns)
    produced = run.to_json()
    no_latency = {"latency_ms": None}  # an image that could not be classified had no forward: empty cell
    writer.writerows([["" if row.get(c) is None else row[c] for c in columns]
                      for row in ({**r, **produced, **(no_latency if r.get("error") else {})}
                                  for r in result_rows(results))])
    return out.getvalue()


NONFINITE_WARNING = "the model gave NaN or infinite probabilities (diverged weights?): shown as null"


def results_json(results: Sequence[ImageResult], run: RunInfo) -> str:
    """The JSON list `classify --json` prints: one `result_record` per image, in order. Always JSON: a NaN or
    infinite number (diverged weights) is null, and its record says why in "warning"."""
    records = []
    for result in results:
        record, replaced = finite(result_record(result, run))
        records.append({**record, "warning": NONFINITE_WARNING} if replaced else record)
    return json.dumps(records, indent=2, allow_nan=False)


def finite(value: Any) -> tuple[Any, bool]:
    """`value` with every NaN/Infinity float (at any depth) replaced by None, and whether any was."""
    if isinstance(value, float):
        return (value, False) if math.isfinite(value) else (None, True)
    if isinstance(value, dict):
        pairs = {k: finite(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(r for _, r in pairs.values())
    if isinstance(value, (list, tuple)):
        items = [finite(v) for v in value]
        return [v for v, _ in items], any(r for _, r in items)
    return value, False


def evaluation_json(result: Mapping[str, object]) -> str:
    return json.dumps(result, indent=2)


def confusion_csv(confusion: Mapping[str, Any]) -> str:
    """An evaluation's {"classes", "matrix"}: a header row and a first column of class ids
    (true classes down, predicted across)."""
    out = io.StringIO()
    writer = csv_cells.writer(out, lineterminator="\n")
    writer.writerow(["true\\predicted", *confusion["classes"]])
    for name, row in zip(confusion["classes"], confusion["matrix"]):
        writer.writerow([name, *row])
    return out.getvalue()
