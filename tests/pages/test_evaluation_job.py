"""AppTest: a long evaluation (more than DLGUIDE_EVAL_INLINE_MAX images) runs as a job of the store, shows
its progress while it runs and, once it finishes, the same heatmap and downloads from its stored JSON;
a new session (a reload, another tab) finds that result again. Short ones stay inline."""

from __future__ import annotations

import pytest

from dlguide_core.jobs.evaluation_job import EVALUATE_RECIPE, stored_result
from dlguide_core.jobs.store import JobStore
from tests.support.apptest import open_app
from tests.support.charts import plotly_charts
from tests.support.jobs import finished_job
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_until_done


def _shows_result(at) -> bool:
    return any(t.startswith("Confusion matrix") for t in plotly_charts(at))


@pytest.mark.slow
def test_a_long_evaluation_runs_as_a_job_and_its_result_survives_a_reload(tmp_path, monkeypatch) -> None:
    data = write_toy_dataset(tmp_path / "roots" / "toy", classes=3, per_class=1, val_per_class=3)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    monkeypatch.setenv("DLGUIDE_EVAL_INLINE_MAX", "4")  # 9 val images: long
    store = JobStore()
    trained = finished_job(store, data, 0.01, 40.0)
    at = open_app("pages/train.py")
    at.button(key="train_eval_run").click().run()
    assert not at.exception, at.exception
    evaluation = next(j for j in store.list_jobs() if j.recipe == EVALUATE_RECIPE)
    assert evaluation.config["weights"] == store.get(trained).checkpoint
    assert not _shows_result(at)
    texts = [e.proto.text for e in at.get("progress")] + [i.value for i in at.info]
    assert any(f"Evaluation job {evaluation.id}" in t for t in texts), texts  # its progress (or its queue place)
    wait_until_done(store, evaluation.id, timeout=120)
    at.run()  # the fragment's next poll reruns the page; AppTest has no timer, so rerun by hand
    assert not at.exception, at.exception
    assert store.get(evaluation.id).status == "succeeded" and _shows_result(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Top-1"] == f"{stored_result(evaluation.id)['top1']:.2f} %"
    assert "Download evaluation (JSON)" in [b.proto.label for b in at.get("download_button")]
    assert evaluation.id not in at.multiselect(key="train_view_jobs").options  # no curves to overlay
    again = open_app("pages/train.py")  # a new session: found again from the store, nothing clicked
    assert not again.exception and _shows_result(again)
    assert len([j for j in store.list_jobs() if j.recipe == EVALUATE_RECIPE]) == 1


def test_a_short_evaluation_stays_inline(tmp_path, monkeypatch) -> None:
    data = write_toy_dataset(tmp_path / "roots" / "toy", classes=3, per_class=1, val_per_class=3)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    store = JobStore()
    finished_job(store, data, 0.01, 40.0)
    at = open_app("pages/train.py")
    at.button(key="train_eval_run").click().run()
    assert not at.exception and _shows_result(at)
    assert [j.recipe for j in store.list_jobs()] == ["cifar_net"]


@pytest.mark.slow
def test_classify_runs_a_long_evaluation_of_a_checkpoint_as_a_job(tmp_path, monkeypatch) -> None:
    data = write_toy_dataset(tmp_path / "roots" / "toy", classes=3, per_class=1, val_per_class=3)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    monkeypatch.setenv("DLGUIDE_EVAL_INLINE_MAX", "4")
    store = JobStore()
    checkpoint = store.get(finished_job(store, data, 0.01, 40.0)).checkpoint
    other = store.get(finished_job(store, data, 0.1, 50.0)).checkpoint
    at = open_app()
    at.selectbox(key="classify_weights").set_value(checkpoint).run()
    at.button(key="classify_eval_run").click().run()
    assert not at.exception, at.exception
    evaluation = next(j for j in store.list_jobs() if j.recipe == EVALUATE_RECIPE)
    assert evaluation.config["weights"] == checkpoint and evaluation.config["split"] == "val"
    wait_until_done(store, evaluation.id, timeout=120)
    at.run()
    assert not at.exception and _shows_result(at)
    at.selectbox(key="classify_weights").set_value(other).run()  # other weights: not this job's result
    assert not at.exception and at.button(key="classify_eval_run") and not _shows_result(at)
