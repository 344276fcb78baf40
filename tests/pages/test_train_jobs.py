"""AppTest of the Train page's form and job panel (issue 24): one recipe-led form, charts a person can read,
class names in words, a comparison that survives navigation, the job's log, Evaluate newest first."""

from __future__ import annotations

import json
import os
import time

from dlguide_core.jobs.job import display_label
from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe
from tests.support.apptest import open_app
from tests.support.tiny_imagenet import WNIDS, write_tiny_imagenet
from tests.support.toy_data import write_toy_dataset
from ui.literal_text import literal


def _job(store: JobStore, status: str, steps: int = 3, epochs: int = 1, data: str = "/nonexistent",
         per_class: dict | None = None, checkpoint: bool = False) -> str:
    cfg = get_recipe("cifar_net").make_config(data=data, epochs=1)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, max(steps, 1), 1, tuple(per_class or ("a", "b")))
    now = time.time()
    store.add_steps([(job.id, s, 0, 2.0 / s, 0.001, 40.0, now + s * 0.01, None) for s in range(1, steps + 1)])
    for epoch in range(epochs):
        store.add_epoch(job.id, epoch, {"train_loss": 1.2, "val_loss": 1.1, "top1": 50.0, "top5": 100.0,
                                        "per_class": per_class or {"a": 25.0, "b": 75.0}})
    if checkpoint:
        path = job.job_dir / "checkpoint.pt"
        path.write_bytes(b"stand-in")
        store.set_checkpoint(job.id, path, steps, 0)
    if status != "running":
        store.finish(job.id, status)
    return job.id


def _charts(at) -> dict[str, dict]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return {s["layout"].get("title", {}).get("text", ""): s for s in specs}


def _start_buttons(at) -> list:
    return [b for b in at.get("button") if b.proto.label == "Start training"]


def test_the_form_leads_with_the_recipe_for_the_data_there_is(tmp_path, monkeypatch) -> None:
    write_tiny_imagenet(tmp_path / "roots" / "tiny-imagenet-10")
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app("pages/train.py")
    assert not at.exception, at.exception
    assert at.selectbox(key="train_recipe").value == "inception_v3"  # not the TensorFlow form first
    assert any("still has the zip's val/images layout" in w.value for w in at.warning)
    assert not _start_buttons(at)  # nothing to start until it is prepared
    at.button(key="train_prepare").click().run()
    assert not at.exception, at.exception
    assert len(_start_buttons(at)) == 1  # one form, one Start (no TensorFlow section beside it)
    assert not [s for s in at.selectbox if s.key and "train_tf" in s.key]


def test_a_tensorflow_recipe_offline_without_its_data_offers_no_start(tmp_path, monkeypatch) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app("pages/train.py")
    if "tf_fashion_mnist" not in at.selectbox(key="train_recipe").options:
        assert not at.exception
        return  # TensorFlow is not installed here: the picker has only the PyTorch recipes, as it should
    at.selectbox(key="train_recipe").select("tf_fashion_mnist").run()
    assert not at.exception, at.exception
    assert not _start_buttons(at)
    [why] = [i.value for i in at.info if "offline" in i.value]
    assert str((tmp_path / "roots").resolve()) in why  # the fix names a folder inside the data roots


def test_every_training_field_has_help(tmp_path, monkeypatch) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app("pages/train.py")
    at.selectbox(key="train_recipe").select("cifar_net").run()
    fields = [w for kind in ("number_input", "selectbox", "checkbox") for w in at.get(kind)
              if w.key and w.key.startswith("train_cifar_net_")]
    assert len(fields) >= 13
    assert all(w.help for w in fields), [w.key for w in fields if not w.help]
    rule = "The run stops at whichever limit comes first, Epochs or Max steps"  # issue 43: neither "wins"
    assert rule in at.number_input(key="train_cifar_net_max_steps").help
    assert any(c.value.startswith(rule) for c in at.caption)  # said on the form too
    assert not any("wins" in c.value for c in at.caption)


def test_a_one_point_epoch_chart_shows_a_marker_and_a_run_keeps_its_colour() -> None:
    store = JobStore()
    first, second = _job(store, "succeeded", epochs=1), _job(store, "succeeded", steps=5, epochs=1)
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([first, second]).run()
    assert not at.exception, at.exception
    charts = _charts(at)
    accuracy = charts["Val accuracy per epoch (%)"]
    assert all("markers" in t["mode"] for t in accuracy["data"])  # one epoch: a point you can see
    colours: dict[str, set] = {first: set(), second: set()}
    for title in ("Training loss per step", "Learning rate", "Images/s", "Loss per epoch",
                  "Val accuracy per epoch (%)"):
        for trace in charts[title]["data"]:  # "<run name> (<id>) raw": the run's name, its id secondary
            colours[trace["name"].split(")")[0].rsplit("(", 1)[1]].add(trace["line"]["color"])
    assert len(colours[first]) == 1 and len(colours[second]) == 1 and colours[first] != colours[second]
    per_class = charts[f"{display_label(store.get(first))}: accuracy per class at the last epoch (%)"]
    assert per_class["data"][0]["marker"]["color"] == next(iter(colours[first]))


def test_a_run_that_has_not_reported_says_waiting_not_empty_axes() -> None:
    store = JobStore()
    job_id = _job(store, "running", steps=0, epochs=0)
    at = open_app("pages/train.py")
    assert not at.exception, at.exception
    assert any(i.value.startswith(f"{literal(display_label(store.get(job_id)))}: waiting for the first step")
               for i in at.info)  # the name escaped: it is shown as typed, never as Markdown
    assert not at.get("plotly_chart")
    store.finish(job_id, "failed", "no dataset at /nonexistent\nTraceback ...")  # issue 31: why, not an hourglass
    at.run()
    assert not [i for i in at.info if "waiting for the first step" in i.value]
    assert any(e.value.endswith("failed before its first step: no dataset at /nonexistent") for e in at.error)


def test_the_comparison_survives_another_page_and_a_new_run_joins_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_MAX_JOBS", "1")
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    store = JobStore()
    a, b = _job(store, "succeeded"), _job(store, "succeeded")
    _job(store, "running")  # holds the only slot: the job started below stays queued
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([a, b]).run()
    at.switch_page("pages/devices.py").run()
    at.switch_page("pages/train.py").run()
    assert not at.exception, at.exception
    assert at.multiselect(key="train_view_jobs").value == [a, b]
    at.selectbox(key="train_recipe").select("cifar_net").run()
    at.button(key="train_cifar_net_start").click().run()
    assert not at.exception, at.exception
    (new,) = [j.id for j in store.list_jobs() if j.status == "queued"]
    assert at.multiselect(key="train_view_jobs").value == [a, b, new]
    assert any(f"(job {new}) is queued" in i.value for i in at.info)  # the truth: not "running"; named first


def test_per_class_accuracy_shows_the_datasets_words_with_the_id_in_the_tooltip(tmp_path) -> None:
    data = write_tiny_imagenet(tmp_path / "tiny")
    (data / "words.txt").write_text("n01443537\tgoldfish, Carassius auratus\nn02124075\tEgyptian cat\n"
                                    "n07749582\tlemon\n")
    store = JobStore()
    job_id = _job(store, "succeeded", data=str(data), per_class=dict.fromkeys(WNIDS, 50.0))
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([job_id]).run()
    bars = _charts(at)[f"{display_label(store.get(job_id))}: accuracy per class at the last epoch (%)"]["data"][0]
    assert bars["x"] == ["goldfish", "Egyptian cat", "lemon"] and bars["customdata"] == list(WNIDS)
    assert "%{customdata}" in bars["hovertemplate"]


def test_the_log_tab_shows_the_jobs_log() -> None:
    store = JobStore()
    job_id = _job(store, "failed")
    store.get(job_id).log_path.write_text("epoch 1 starting\nTraceback: something broke\n")
    at = open_app("pages/train.py")
    at.selectbox(key="train_action_job").set_value(job_id).run()
    assert at.tabs[-1].label == "Log"
    assert any("Traceback: something broke" in c.value for c in at.code)


def test_evaluate_lists_finished_jobs_newest_first() -> None:
    store = JobStore()
    older = _job(store, "succeeded", checkpoint=True)
    time.sleep(0.01)
    newer = _job(store, "succeeded", checkpoint=True)
    at = open_app("pages/train.py")
    picker = at.selectbox(key="train_eval_job")
    assert picker.label == "Job to evaluate" and picker.options[0].endswith(f" · {newer}")  # issue 43: the
    # format of the Train page's job picker ("name · id"), under a label of its own
    assert at.selectbox(key="train_eval_job").value == newer and older in at.selectbox(key="train_eval_job").options[1]


def test_runs_get_a_default_name_and_tags_and_both_can_be_edited(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_MAX_JOBS", "1")
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    store = JobStore()
    _job(store, "running")  # holds the slot: nothing is launched
    at = open_app("pages/train.py")
    at.selectbox(key="train_recipe").select("cifar_net").run()
    at.text_input(key="train_run_tags").set_value("baseline, , small")
    at.button(key="train_cifar_net_start").click().run()
    (job,) = [j for j in store.list_jobs() if j.status == "queued"]
    assert job.name.startswith("cifar_net · toy · ") and job.tags == ("baseline", "small")
    assert at.dataframe[0].value.set_index("job").loc[job.id, "name"] == job.name
    at.text_input(key=f"train_name_{job.id}").set_value("first try")
    at.text_input(key=f"train_tags_{job.id}").set_value("lr-sweep")
    at.button(key=f"train_rename_{job.id}").click().run()
    assert not at.exception, at.exception
    renamed = store.get(job.id)
    assert renamed.name == "first try" and renamed.tags == ("lr-sweep",)


def test_the_panel_keeps_its_elements_opaque_while_it_refreshes() -> None:
    at = open_app("pages/train.py")
    styles = [h.proto.body for h in at.get("html")]
    assert any('[data-stale="true"] {opacity: 1 !important' in body for body in styles)
