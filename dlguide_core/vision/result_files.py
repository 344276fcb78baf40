"""Results as files people take away: classification results as CSV/JSON rows
(image, rank, label, index, probability), evaluation results as JSON."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from dlguide_core import csv_cells
from dlguide_core.vision.classify import ImageResult

RESULT_COLUMNS = ("image", "rank", "label", "index", "probability")


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


def results_csv(results: Sequence[ImageResult]) -> str:
    """One row per (image, rank); text cells that a spreadsheet would run as formulas are escaped."""
    out = io.StringIO()
    writer = csv_cells.writer(out, lineterminator="\n")
    columns = [*RESULT_COLUMNS, "error"]
    writer.writerow(columns)
    writer.writerows([["" if row.get(c) is None else row[c] for c in columns] for row in result_rows(results)])
    return out.getvalue()


def results_json(results: Sequence[ImageResult]) -> str:
    return json.dumps(result_rows(results), indent=2)


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
