"""AppTest of the Train page: the job table and a running job's live chart, read from the store."""

from __future__ import annotations

import json
import os
import time

import pytest

from dlguide_core.jobs.job import display_label
from dlguide_core.jobs.store import JobStore
from dlguide_core.training.metrics import ema as ema_of
from dlguide_core.training.recipes import get_recipe
from tests.support.apptest import open_app
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_until_done
from ui.literal_text import literal


def _running_job_with_metrics(steps: int = 50) -> str:
    """A job the store believes runs in this (alive) test process, with steps and one epoch."""
    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=2)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, 100, 2, ("a", "b"))
    now = time.time()
    store.add_steps([(job.id, s, 0, 2.0 / s, 0.001, 40.0, now + s * 0.01, None) for s in range(1, steps + 1)])
    store.add_epoch(job.id, 0, {"train_loss": 0.9, "val_loss": 0.8, "top1": 55.0, "top5": 100.0})
    return job.id


def test_page_shows_the_job_table_and_a_running_jobs_charts() -> None:
    job_id = _running_job_with_metrics()
    at = open_app("pages/train.py")
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table["job"]) == [job_id]
    assert table["status"][0] == "running" and table["progress"][0] == "50/100"
    charts = at.get("plotly_chart")
    assert len(charts) == 5, "loss, lr, images/s and the two per-epoch charts"
    loss_chart = json.loads(charts[0].proto.spec)
    assert loss_chart["layout"]["title"]["text"] == "Training loss per step"
    name = display_label(JobStore().get(job_id))  # the run's name, its id secondary (issue 31)
    assert [t["name"] for t in loss_chart["data"]] == [f"{name} raw", f"{name} EMA 0.60"]
    assert name.startswith("cifar_net · ") and name.endswith(f"({job_id})")
    assert at.multiselect(key="train_view_jobs").value == [job_id]


def test_page_without_data_explains_what_to_do(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    at = open_app("pages/train.py")
    assert not at.exception
    assert any("No dataset found" in i.value for i in at.info)
    assert any("No jobs yet" in i.value for i in at.info)


@pytest.mark.slow
def test_form_queues_a_job_that_runs(tmp_path, monkeypatch) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=4, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app("pages/train.py")
    at.selectbox(key="train_recipe").select("cifar_net").run()
    at.number_input(key="train_cifar_net_epochs").set_value(1)
    at.number_input(key="train_cifar_net_workers").set_value(0)
    at.button(key="train_cifar_net_start").click().run()
    assert not at.exception, at.exception
    # the start's feedback names the job: "queued, starting its process" or already "running" (a busy host)
    assert any(" (job " in e.value for e in [*at.success, *at.info]), [e.value for e in at.info]  # named first
    store = JobStore()
    (job,) = store.list_jobs()
    assert job.config["data"] == str((tmp_path / "roots" / "toy").resolve()) and job.config["epochs"] == 1
    assert wait_until_done(store, job.id, timeout=120).status == "succeeded", store.get(job.id).error


# ------------------------------------------------------------ actions and view controls, on jobs made in the store


def _stored_job(store: JobStore, status: str, losses: tuple[float, ...] = (2.0, 1.5, 1.0),
                per_class: dict[str, float] | None = None, checkpoint: bool = False, error: str | None = None,
                **config) -> str:
    """A tiny cifar_net job written straight into the store (no process) in `status` (with a checkpoint file)."""
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", **{"epochs": 1, **config})
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.claim(job.id, os.getpid())  # alive while the test runs: never marked interrupted
    store.set_plan(job.id, len(losses), 1, tuple(per_class or ("a", "b")))
    now = time.time()
    store.add_steps([(job.id, s, 0, loss, 0.001, 40.0, now + s * 0.01, None) for s, loss in enumerate(losses, 1)])
    store.add_epoch(job.id, 0, {"train_loss": 1.2, "val_loss": 1.1, "top1": 50.0, "top5": 100.0,
                                "per_class": per_class or {"a": 25.0, "b": 75.0}})
    if checkpoint:
        path = store.get(job.id).job_dir / "checkpoint.pt"
        path.write_bytes(b"stand-in")
        store.set_checkpoint(job.id, path, len(losses), 0)
    if status != "running":
        store.finish(job.id, status, error)
    return job.id


def _values(data) -> list[float]:
    """A trace's x or y: a list, or plotly's typed-array encoding of a numpy array."""
    if isinstance(data, dict) and "bdata" in data:
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"])).tolist()
    return list(data)


def _chart(at, title_part: str) -> dict:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    found = [s for s in specs if title_part in s["layout"].get("title", {}).get("text", "")]
    assert found, f"no chart titled {title_part!r}"
    return found[0]


def test_cancel_button_asks_a_running_job_to_stop() -> None:
    store = JobStore()
    running = _stored_job(store, "running")
    at = open_app("pages/train.py")
    at.selectbox(key="train_action_job").set_value(running).run()
    assert not at.button(key="train_cancel").disabled and at.button(key="train_resume").disabled
    assert at.button(key="train_delete").disabled  # an active job cannot be deleted
    at.button(key="train_cancel").click().run()
    assert not at.exception, at.exception
    assert store.cancel_requested(running) and store.get(running).status == "running"  # stops at its next step
    # issue 31, 6: until it ends the job says so, everywhere, and Cancel is off (not a second cancel)
    cancel = at.button(key="train_cancel")
    assert cancel.disabled and cancel.help.startswith("Cancel requested")
    assert at.dataframe[0].value.set_index("job").loc[running, "status"] == "cancel requested"
    assert at.selectbox(key="train_action_job").format_func(running).endswith(f" · {running}")  # its state: above
    assert any(t.value.startswith("cifar_net · ") and running in t.value for t in at.text)  # the summary's line


def test_resume_button_requeues_a_cancelled_job(monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_MAX_JOBS", "1")
    store = JobStore()
    cancelled = _stored_job(store, "cancelled", checkpoint=True)
    _stored_job(store, "running")  # holds the only slot: the resumed job waits in the queue, no process starts
    at = open_app("pages/train.py")
    at.selectbox(key="train_action_job").set_value(cancelled).run()
    assert at.button(key="train_cancel").disabled and not at.button(key="train_resume").disabled
    at.button(key="train_resume").click().run()
    assert not at.exception, at.exception
    assert store.get(cancelled).status == "queued"
    assert at.dataframe[0].value.set_index("job").loc[cancelled, "status"] == "queued"


def test_delete_asks_first_naming_what_is_lost_and_never_deletes_twice() -> None:
    store = JobStore()
    keep, gone = _stored_job(store, "succeeded", checkpoint=True), _stored_job(store, "failed", checkpoint=True)
    folder = store.get(gone).job_dir
    at = open_app("pages/train.py")
    at.selectbox(key="train_action_job").set_value(gone).run()
    at.button(key="train_delete").click().run()
    assert not at.exception, at.exception
    assert folder.is_dir() and len(store.list_jobs()) == 2  # one click deletes nothing
    [question] = [w.value for w in at.warning if "for good" in w.value]
    assert gone in question and str(folder / "checkpoint.pt") in question and "cannot be undone" in question
    at.button(key="train_delete_keep").click().run()
    assert len(store.list_jobs()) == 2 and not [w for w in at.warning if "for good" in w.value]

    at.button(key="train_delete").click().run()
    at.button(key="train_delete_confirm").click().run()
    assert not at.exception, at.exception
    assert [j.id for j in store.list_jobs()] == [keep] and not folder.exists()
    assert list(at.dataframe[0].value["job"]) == [keep]
    assert any(f"(job {gone})" in s.value and s.value.startswith("Deleted") for s in at.success)
    # nothing is under the buttons until the user picks (the next job's Delete is never one click away)
    assert at.selectbox(key="train_action_job").value is None
    assert "train_delete" not in [b.key for b in at.button]
    at.selectbox(key="train_action_job").set_value(keep).run()
    at.button(key="train_delete").click().run()
    assert [j.id for j in store.list_jobs()] == [keep]
    assert any(keep in w.value and "for good" in w.value for w in at.warning)


def test_a_failed_job_shows_its_reason_in_full_and_resume_is_off_with_why() -> None:
    store = JobStore()
    reason = ("Fashion-MNIST is not available offline: download the four files into a folder under the data "
              "roots (e.g. /data/fashion-mnist) and pick it")
    failed = _stored_job(store, "failed", error=reason)
    at = open_app("pages/train.py")
    at.selectbox(key="train_action_job").set_value(failed).run()
    assert any(e.value == reason for e in at.error), [e.value for e in at.error]  # in full, not clipped
    resume = at.button(key="train_resume")
    assert resume.disabled and "No checkpoint" in resume.help
    assert any("Resume is off: No checkpoint" in c.value for c in at.caption)
    assert at.dataframe[0].value.set_index("job").loc[failed, "note"].endswith("(in full below)")


def test_a_job_stopped_by_max_steps_says_so() -> None:
    store = JobStore()
    job_id = _stored_job(store, "succeeded", losses=(2.0, 1.5), epochs=2, max_steps=2)
    at = open_app("pages/train.py")
    at.selectbox(key="train_action_job").set_value(job_id).run()
    assert any("Stopped at max steps 2, in epoch 1 of 2" in c.value for c in at.caption)


def test_csv_download_is_offered_for_the_picked_job() -> None:
    store = JobStore()
    job_id = _stored_job(store, "succeeded")
    at = open_app("pages/train.py")
    assert at.selectbox(key="train_export_job").value == job_id
    [button] = [b for b in at.get("download_button") if b.proto.id.endswith("train_export_csv")]
    assert button.proto.label == "Download CSV" and button.proto.url  # the CSV is served from the media store


def test_log_scale_toggle_and_smoothing_slider_redraw_the_loss_chart() -> None:
    job_id = _stored_job(JobStore(), "running", losses=(4.0, 2.0, 1.0, 0.5))
    at = open_app("pages/train.py")
    loss = _chart(at, "Training loss per step")
    assert loss["layout"]["yaxis"]["type"] == "linear"
    at.toggle(key="train_log_y").set_value(True).run()
    assert _chart(at, "Training loss per step")["layout"]["yaxis"]["type"] == "log"
    assert _chart(at, "Learning rate")["layout"]["yaxis"]["type"] == "log"
    at.slider(key="train_smoothing").set_value(0.9).run()
    loss = _chart(at, "Training loss per step")
    name = display_label(JobStore().get(job_id))
    assert [t["name"] for t in loss["data"]] == [f"{name} raw", f"{name} EMA 0.90"]
    ema = _values(loss["data"][1]["y"])
    assert ema == pytest.approx(ema_of([4.0, 2.0, 1.0, 0.5], 0.9).tolist())
    assert ema[1] > ema_of([4.0, 2.0], 0.6)[1]  # heavier smoothing: a slower curve than the default 0.6
    at.slider(key="train_smoothing").set_value(0.0).run()
    assert [t["name"] for t in _chart(at, "Training loss per step")["data"]] == [f"{name} raw"]


def test_several_runs_overlay_in_the_same_charts() -> None:
    store = JobStore()
    first, second = _stored_job(store, "succeeded"), _stored_job(store, "succeeded", losses=(3.0, 2.0))
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([first, second]).run()
    assert not at.exception, at.exception
    loss = _chart(at, "Training loss per step")
    names = [display_label(store.get(j)) for j in (first, second)]
    assert {t["name"] for t in loss["data"]} == {f"{j} {k}" for j in names for k in ("raw", "EMA 0.60")}
    assert {t["name"] for t in _chart(at, "Val accuracy per epoch")["data"]} == {
        f"{j} {k}" for j in names for k in ("top-1", "top-5")}
    colours = {t["name"]: t["line"]["color"] for t in loss["data"]}
    assert colours[f"{names[0]} raw"] == colours[f"{names[0]} EMA 0.60"] != colours[f"{names[1]} raw"]


def test_a_finished_job_shows_its_per_class_accuracy() -> None:
    store = JobStore()
    done = _stored_job(store, "succeeded", per_class={"plane": 37.9, "car": 62.5, "bird": 10.0})
    running = _stored_job(store, "running")
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([done, running]).run()
    assert not at.exception, at.exception
    bars = _chart(at, "accuracy per class")
    assert bars["layout"]["title"]["text"].startswith(display_label(store.get(done)))  # the finished job only
    assert _values(bars["data"][0]["x"]) == ["plane", "car", "bird"]
    assert _values(bars["data"][0]["y"]) == [37.9, 62.5, 10.0]


def test_dataset_browser_shows_class_counts_and_sample_images(tmp_path, monkeypatch) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=3, per_class=4, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app("pages/train.py")
    assert not at.get("image")
    at.toggle(key="train_browse").set_value(True).run()
    assert not at.exception, at.exception
    counts = _chart(at, "Train images per class")
    assert _values(counts["data"][0]["x"]) == ["class_0", "class_1", "class_2"]
    captions = [img.caption for element in at.get("image") for img in element.proto.imgs]
    assert sorted(set(captions)) == ["class_0", "class_1", "class_2"]


def test_form_shows_the_global_batch_and_stores_the_amp_dtype(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_MAX_JOBS", "1")
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    store = JobStore()
    _stored_job(store, "running")  # holds the slot: the new job is only queued
    at = open_app("pages/train.py")
    at.selectbox(key="train_recipe").select("cifar_net").run()
    at.number_input(key="train_cifar_net_batch").set_value(8)
    at.selectbox(key="train_cifar_net_amp_dtype").set_value("fp16")
    at.button(key="train_cifar_net_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("global batch 8 (8 per device x 1 process x 1 machine)" in s.value and "queued" in s.value
               for s in at.info)
    queued = [j for j in store.list_jobs() if j.status == "queued"]
    assert len(queued) == 1 and queued[0].config["amp_dtype"] == "float16"


def test_a_tensorflow_jobs_per_batch_accuracy_gets_its_own_chart() -> None:
    """Keras' per-batch accuracy (kept in the steps' extra column) is drawn in %; PyTorch runs have none."""
    store = JobStore()
    torch_job = _stored_job(store, "succeeded")
    job = store.create("tf_fashion_mnist", "tensorflow", {"epochs": 1})
    store.claim(job.id, os.getpid())
    now = time.time()
    store.add_steps([(job.id, s, 0, 1.0 / s, 0.001, 500.0, now + s, json.dumps({"accuracy": a}))
                     for s, a in enumerate((0.5, 0.625, 0.75), 1)])
    store.finish(job.id, "succeeded")
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([torch_job]).run()
    assert not at.exception, at.exception
    assert not [c for c in at.get("plotly_chart") if "Training accuracy" in c.proto.spec]
    at.multiselect(key="train_view_jobs").set_value([torch_job, job.id]).run()
    chart = _chart(at, "Training accuracy per batch")
    assert [t["name"] for t in chart["data"]] == [display_label(store.get(job.id))]  # only the run that records it
    assert _values(chart["data"][0]["y"]) == [50.0, 62.5, 75.0]


def test_live_view_drops_cached_steps_that_a_resumed_run_trimmed_and_redid() -> None:
    """The page caches a job's steps and then fetches only newer ones; a resume that restored an
    earlier checkpoint rewrites steps the cache already holds, so the cache must notice."""
    store = JobStore()
    job_id = _stored_job(store, "running", losses=(4.0, 3.0, 2.0, 1.0))
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([job_id]).run()
    assert _values(_chart(at, "Training loss per step")["data"][0]["y"]) == [4.0, 3.0, 2.0, 1.0]
    store.trim_metrics(job_id, 2, 0)  # the resumed run restored step 2 ...
    store.add_steps([(job_id, 3, 0, 9.0, 0.001, 40.0, time.time() + 100, None)])  # ... and redid step 3
    at.run()
    assert not at.exception, at.exception
    assert _values(_chart(at, "Training loss per step")["data"][0]["y"]) == [4.0, 3.0, 9.0]


def test_a_constant_learning_rate_gets_an_axis_around_its_value() -> None:
    """Plotly pads a flat line by ±1: a constant lr of 0.001 would read as 0 on a -1..1 axis."""
    _running_job_with_metrics()  # lr 0.001 at every step
    at = open_app("pages/train.py")
    assert not at.exception, at.exception
    assert _chart(at, "Learning rate")["layout"]["yaxis"]["range"] == pytest.approx([0.0, 0.002])
    assert "range" not in _chart(at, "Training loss per step")["layout"].get("yaxis", {})  # varying: autorange


def _diverged_job(store: JobStore, steps: int = 3000) -> str:
    """A running job whose loss blew up and then went NaN (Keras passes NaN through) for most of its steps."""
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=1)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, steps * 2, 1, ("a", "b"))
    now = time.time()
    losses = [2.4 + s * 0.5 if s < 40 else float("nan") for s in range(1, steps + 1)]
    store.add_steps([(job.id, s, 0, loss, 0.1, 40.0, now + s * 0.01, None) for s, loss in enumerate(losses, 1)])
    return job.id


def test_a_diverged_run_with_nan_losses_still_draws_its_charts() -> None:
    job_id = _diverged_job(JobStore())
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([job_id]).run()
    assert not at.exception, at.exception
    raw = _values(_chart(at, "Training loss per step")["data"][0]["y"])
    assert len(raw) <= 2000 and max(v for v in raw if v == v) == pytest.approx(2.4 + 39 * 0.5)


def test_a_diverged_run_is_flagged_with_a_hint_and_a_healthy_one_is_not() -> None:
    store = JobStore()
    healthy, diverged = _stored_job(store, "succeeded"), _diverged_job(store)
    at = open_app("pages/train.py")
    at.multiselect(key="train_view_jobs").set_value([healthy]).run()
    assert not [w for w in at.warning if "diverg" in w.value]
    at.multiselect(key="train_view_jobs").set_value([healthy, diverged]).run()
    assert not at.exception, at.exception
    flagged = [w.value for w in at.warning if "diverg" in w.value]
    assert flagged[0].startswith(f"{literal(display_label(JobStore().get(diverged)))}: the loss became NaN at step 40 "
                                 "of 3000")  # the run's name escaped: shown as typed, never as Markdown
    assert any("the loss rose from" in w for w in flagged) and store.get(diverged).status == "running"


def test_the_image_size_bounds_come_from_the_architecture(tmp_path, monkeypatch) -> None:
    """The form once hard-coded `32 if cifar_net else 75`: ResNet-50's field now starts at its entry's 64."""
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    at = open_app("pages/train.py")
    at.selectbox(key="train_recipe").select("resnet50").run()
    size = at.number_input(key="train_resnet50_size")
    assert (size.min, size.value) == (64, 224) and not size.proto.disabled
    at.selectbox(key="train_recipe").select("cifar_net").run()
    size = at.number_input(key="train_cifar_net_size")
    assert (size.min, size.value) == (32, 32) and size.proto.disabled


def test_offline_without_cached_imagenet_weights_the_form_starts_untrained_and_says_why(tmp_path,
                                                                                       monkeypatch) -> None:
    write_toy_dataset(tmp_path / "roots" / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(tmp_path / "roots"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "no-weights"))  # DLGUIDE_OFFLINE=1 for every test
    at = open_app("pages/train.py")
    at.selectbox(key="train_recipe").select("inception_v3").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="train_inception_v3_weights").value == "none"  # issue 31: not imagenet, which fails
    assert any("ImageNet weights are not cached" in i.value and "DLGUIDE_OFFLINE" in i.value for i in at.info)
