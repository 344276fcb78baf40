"""Result files people open in spreadsheets: text that begins like a formula is escaped (OWASP's rule
against CSV injection, issue 18 point 13); numbers and ordinary names are written as they are."""

from __future__ import annotations

import csv
import io

from dlguide_core.csv_cells import safe_cell
from dlguide_core.vision.classify import ImageResult, Prediction
from dlguide_core.vision.result_files import RunInfo, confusion_csv, results_csv

RUN = RunInfo("=weights.pt", "onnxruntime", "int8", 12.5)

HOSTILE = ["=HYPERLINK(\"http://x\")", "+1+2", "-2+3", "@SUM(A1)", "\tx", "\rx"]


def test_formula_like_cells_are_quoted_and_numbers_are_not():
    assert [safe_cell(v) for v in HOSTILE] == ["'" + v for v in HOSTILE]
    assert [safe_cell(v) for v in ("cat", "a=b", -0.5, 3, None)] == ["cat", "a=b", -0.5, 3, None]


def test_results_csv_escapes_image_names_labels_and_errors():
    results = [ImageResult("=cmd|' /C calc'!A0.jpg", top=(Prediction("@evil", 3, 0.75),)),
               ImageResult("-bad.png", error="-not an image")]
    rows = list(csv.reader(io.StringIO(results_csv(results, RUN))))
    assert rows[0] == ["image", "rank", "label", "index", "probability", "error",
                       "weights", "backend", "precision", "latency_ms"]
    assert rows[1] == ["'=cmd|' /C calc'!A0.jpg", "1", "'@evil", "3", "0.75", "", "'=weights.pt", "onnxruntime",
                       "int8", "12.5"]
    # issue 31: no forward ran for an image that could not be read: no latency of its own
    assert rows[2] == ["'-bad.png", "", "", "", "", "'-not an image", "'=weights.pt", "onnxruntime", "int8", ""]


def test_confusion_csv_escapes_class_names():
    text = confusion_csv({"classes": ["+a", "b"], "matrix": [[1, 0], [2, 3]]})
    assert list(csv.reader(io.StringIO(text))) == [["true\\predicted", "'+a", "b"], ["'+a", "1", "0"],
                                                   ["b", "2", "3"]]


def test_the_pages_json_download_has_the_shape_classify_json_prints(capsys, sample_jpeg, tmp_path):
    """The Classify page builds its JSON with results_json(classify_timed(...)); the CLI prints classify --json:
    the same keys, image by image, good images and bad ones alike."""
    import json

    from dlguide_core.cli.main import main
    from dlguide_core.vision.models import load_model
    from dlguide_core.vision.result_files import classify_timed, results_json

    bad = tmp_path / "bad.jpg"
    bad.write_text("not an image")
    assert main(["classify", str(sample_jpeg), str(bad), "--weights", "none", "--top", "3", "--json"]) == 1
    cli = json.loads(capsys.readouterr().out)
    sources = [(str(sample_jpeg), sample_jpeg.read_bytes()), (str(bad), bad.read_bytes())]
    ui = json.loads(results_json(*classify_timed(load_model("none"), sources, weights="none", backend="torch", k=3)))
    assert [set(r) for r in ui] == [set(r) for r in cli]
    assert [set(p) for p in ui[0]["top"]] == [set(p) for p in cli[0]["top"]]
    assert {"weights", "backend", "precision", "latency_ms", "top"} <= set(cli[0]) and "error" in cli[1]
    assert cli[0]["latency_ms"] > 0 and "latency_ms" in cli[1] and cli[1]["latency_ms"] is None  # same keys, null
    assert (ui[0]["weights"], ui[0]["backend"], ui[0]["precision"]) == ("none", "torch", "fp32")
