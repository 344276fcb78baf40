"""Result files people open in spreadsheets: text that begins like a formula is escaped (OWASP's rule
against CSV injection, issue 18 point 13); numbers and ordinary names are written as they are."""

from __future__ import annotations

import csv
import io

from dlguide_core.csv_cells import safe_cell
from dlguide_core.vision.classify import ImageResult, Prediction
from dlguide_core.vision.result_files import confusion_csv, results_csv

HOSTILE = ["=HYPERLINK(\"http://x\")", "+1+2", "-2+3", "@SUM(A1)", "\tx", "\rx"]


def test_formula_like_cells_are_quoted_and_numbers_are_not():
    assert [safe_cell(v) for v in HOSTILE] == ["'" + v for v in HOSTILE]
    assert [safe_cell(v) for v in ("cat", "a=b", -0.5, 3, None)] == ["cat", "a=b", -0.5, 3, None]


def test_results_csv_escapes_image_names_labels_and_errors():
    results = [ImageResult("=cmd|' /C calc'!A0.jpg", top=(Prediction("@evil", 3, 0.75),)),
               ImageResult("-bad.png", error="-not an image")]
    rows = list(csv.reader(io.StringIO(results_csv(results))))
    assert rows[0] == ["image", "rank", "label", "index", "probability", "error"]
    assert rows[1] == ["'=cmd|' /C calc'!A0.jpg", "1", "'@evil", "3", "0.75", ""]
    assert rows[2] == ["'-bad.png", "", "", "", "", "'-not an image"]


def test_confusion_csv_escapes_class_names():
    text = confusion_csv({"classes": ["+a", "b"], "matrix": [[1, 0], [2, 3]]})
    assert list(csv.reader(io.StringIO(text))) == [["true\\predicted", "'+a", "b"], ["'+a", "1", "0"],
                                                   ["b", "2", "3"]]
