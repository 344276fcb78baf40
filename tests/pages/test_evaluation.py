"""AppTest of issue 13's page parts: evaluating a finished job (Train) and any weights (Classify),
the comparison table of the selected runs, and Classify's result downloads."""

from __future__ import annotations

import pytest
from PIL import Image

from dlguide_core.jobs.store import JobStore
from tests.support.apptest import open_app
from tests.support.charts import plotly_charts
from tests.support.jobs import finished_job
from tests.support.toy_data import write_toy_dataset


def _frame_with(at, column: str):
    """The dataframe holding `column` (AppTest does not keep dataframe keys)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_train_page_evaluates_a_finished_job(tmp_path, monkeypatch) -> None:
    data = write_toy_dataset(tmp_path / "roots" / "toy", classes=3, per_class=1, val_per_class=3)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    job_id = finished_job(JobStore(), data, 0.01, 40.0)
    at = open_app("pages/train.py")
    assert at.selectbox(key="train_eval_job").value == job_id
    assert at.selectbox(key="train_eval_data").value.path.resolve() == data.resolve()  # the job's own data
    at.button(key="train_eval_run").click().run()
    assert not at.exception, at.exception
    charts = plotly_charts(at)
    heatmap = next(s for t, s in charts.items() if t.startswith("Confusion matrix"))
    assert heatmap["data"][0]["type"] == "heatmap" and len(heatmap["data"][0]["y"]) == 3
    assert "predicted: %{x}" in heatmap["data"][0]["hovertemplate"]
    assert any(t.startswith("Top-1 per class") for t in charts)
    metrics = {m.label: m.value for m in at.metric}
    assert set(metrics) >= {"Top-1", "Top-5", "Mean loss", "Images/s"} and metrics["Top-5"] == "100.00 %"
    downloads = [b.proto.label for b in at.get("download_button")]
    assert "Download evaluation (JSON)" in downloads and "Download confusion matrix (CSV)" in downloads
    confusions = _frame_with(at, "predicted as")
    assert confusions.empty or set(confusions["true"]) <= {"class_0", "class_1", "class_2"}


def test_selected_runs_show_a_comparison_table_with_what_differs(tmp_path) -> None:
    store = JobStore()
    a = finished_job(store, tmp_path, 0.01, 40.0, checkpoint=False)
    b = finished_job(store, tmp_path, 0.1, 70.0, checkpoint=False)
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([a, b]).run()
    assert not at.exception, at.exception
    table = _frame_with(at, "top-1 final")
    assert list(table["id"]) == [a, b] and list(table["lr"]) == [0.01, 0.1]
    assert list(table["top-1 final"]) == [40.0, 70.0] and "batch_size" not in table
    assert {"top-5 best", "wall time", "images/s"} <= set(table.columns)


def test_classify_downloads_results_of_every_image(sample_jpeg) -> None:
    at = open_app()
    at.selectbox(key="classify_weights").set_value("none").run()
    at.file_uploader(key="classify_upload").set_value([
        ("a.jpg", sample_jpeg.read_bytes(), "image/jpeg"), ("b.jpg", sample_jpeg.read_bytes(), "image/jpeg")]).run()
    assert not at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download results (CSV, 2 image(s))" in labels and "Download results (JSON, 2 image(s))" in labels


@pytest.mark.slow
def test_classify_evaluates_imagenet_weights_as_a_restricted_score(fake_imagenet, tmp_path, monkeypatch) -> None:
    root = tmp_path / "roots" / "tiny"
    for wnid, colour in (("n01443537", (230, 120, 20)), ("n02124075", (120, 110, 100))):
        for split in ("train", "val"):
            (root / split / wnid).mkdir(parents=True)
            Image.new("RGB", (64, 64), colour).save(root / split / wnid / "a.png")
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app()
    at.selectbox(key="classify_weights").set_value("imagenet").run()
    at.button(key="classify_eval_run").click().run()
    assert not at.exception, at.exception
    assert any("Restricted-label score" in i.value for i in at.info)
    assert any(t.startswith("Confusion matrix") for t in plotly_charts(at))
