"""Results as files people take away: classification results as CSV rows (image, rank, label, index,
probability, error, then what produced them: weights, backend, precision, latency_ms) and as JSON records (one
per image, the shape `classify --json` prints), evaluation results as JSON.

`classify_timed` classifies and says what produced the results (`RunInfo`); `result_record` is the one JSON
record per image, for the CLI and the Classify page's download alike."""

from __future__ import annotations

import io
import json
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
    then "weights", "backend", "precision", "latency_ms"."""
    return {**result.to_json(), **run.to_json()}


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
    writer.writerows([["" if row.get(c) is None else row[c] for c in columns]
                      for row in ({**r, **produced} for r in result_rows(results))])
    return out.getvalue()


def results_json(results: Sequence[ImageResult], run: RunInfo) -> str:
    """The JSON list `classify --json` prints: one `result_record` per image, in order."""
    return json.dumps([result_record(r, run) for r in results], indent=2)


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
