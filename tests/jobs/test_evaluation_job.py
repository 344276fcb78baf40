"""A long evaluation as a job of the store (issue 13): progress while it runs, the same result as inline,
cancel, `evaluate --detach` and `jobs show --json`, and the training-only views that must ignore it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from dlguide_core.cli.main import main
from dlguide_core.evaluation import evaluate_model
from dlguide_core.jobs.catalog import get_recipe, is_training, recipes
from dlguide_core.jobs.comparison import run_summary
from dlguide_core.jobs.evaluation_job import (
    EVALUATE_RECIPE,
    RESULT_FILE,
    EvaluateConfig,
    images_to_score,
    is_long,
    latest_job,
    stored_result,
)
from dlguide_core.jobs.runner import run_job
from dlguide_core.jobs.store import JobError, JobStore
from dlguide_core.jobs.tensorboard_export import export_job
from dlguide_core.training.configs import ConfigError
from dlguide_core.training.sinks import NullSink
from dlguide_core.vision.models import job_checkpoints, load_model
from tests.support.checkpoints import toy_checkpoint
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for, wait_until_done

CLASSES = ("class_0", "class_1", "class_2")
TIMINGS = ("seconds", "images_per_s")  # the only keys allowed to differ between two runs


@pytest.fixture
def toy(tmp_path: Path) -> tuple[Path, Path]:
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=1, val_per_class=4)
    return data, toy_checkpoint(tmp_path / "c.pt", CLASSES)


def _without_timings(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in TIMINGS}


def _inline(data: Path, checkpoint: Path, **kwargs) -> dict:
    return evaluate_model(load_model(str(checkpoint), device="cpu"), data, **kwargs).to_json()


def _claimed(store: JobStore, cfg: EvaluateConfig) -> str:
    job = store.create(EVALUATE_RECIPE, "pytorch", cfg.__dict__)
    store.claim(job.id, os.getpid())
    return job.id


class _Watch(NullSink):
    """Looks at the store from outside the loop while the job runs."""

    def __init__(self, store: JobStore, job_id: str, cancel_at: int | None = None) -> None:
        self.store, self.job_id, self.cancel_at, self.seen = store, job_id, cancel_at, []

    def on_step(self, step: int, epoch: int, loss: float, lr: float, images_per_s: float, **extra) -> None:
        if self.cancel_at == step:
            self.store.request_cancel(self.job_id)
            time.sleep(1.0)  # the store sink polls the cancel flag every 0.25 s
        if step == 5:  # mid-run: wait for the store sink's writer to commit what was reported so far
            summary = wait_for(lambda: (s := self.store.summary(self.store.get(self.job_id, refresh=False)))
                               .step is not None and s, timeout=10, every=0.05,
                               what="progress in the store while the job runs")
            self.seen.append(summary)


def test_evaluation_job_reports_progress_and_writes_the_inline_result(toy) -> None:
    data, checkpoint = toy
    store = JobStore()
    job_id = _claimed(store, EvaluateConfig(weights=str(checkpoint), data=str(data), batch_size=5, device="cpu"))
    watch = _Watch(store, job_id)
    assert run_job(store, job_id, watch) == "succeeded"
    progress = watch.seen[0]
    assert progress.status == "running" and progress.step == 5 and progress.total_steps == 12
    job = store.get(job_id)
    assert job.status == "succeeded" and job.checkpoint is None
    assert store.steps(job_id)["step"] == [5, 10, 12]  # images done after each batch
    stored = stored_result(job_id)
    assert stored == json.loads((job.job_dir / RESULT_FILE).read_text())
    assert _without_timings(stored) == _without_timings(_inline(data, checkpoint, batch_size=5))
    assert not list(job.job_dir.glob("*.tmp")) and not (job.job_dir / "tensorboard").exists()
    assert latest_job(store, str(checkpoint)).id == job_id


def test_cancel_stops_between_batches_without_a_result(toy) -> None:
    data, checkpoint = toy
    store = JobStore()
    job_id = _claimed(store, EvaluateConfig(weights=str(checkpoint), data=str(data), batch_size=2, device="cpu"))
    assert run_job(store, job_id, _Watch(store, job_id, cancel_at=2)) == "cancelled"
    assert store.steps(job_id)["step"][-1] < 12 and stored_result(job_id) is None


def test_an_evaluation_job_stays_out_of_training_views(toy) -> None:
    data, checkpoint = toy
    store = JobStore()
    job_id = _claimed(store, EvaluateConfig(weights=str(checkpoint), data=str(data), device="cpu"))
    assert run_job(store, job_id) == "succeeded"
    job = store.get(job_id)
    assert EVALUATE_RECIPE not in recipes() and get_recipe(EVALUATE_RECIPE).kind == "evaluate"
    assert not is_training(EVALUATE_RECIPE) and is_training("cifar_net") and is_training("not_installed_here")
    assert job_checkpoints() == []  # Classify's checkpoint list
    assert run_summary(store, job).final_top1 is None  # comparison / `jobs list --json`
    with pytest.raises(JobError, match="no training curves"):
        export_job(store, job_id, Path(store.path).parent / "tb")


def test_config_and_the_long_rule(toy, monkeypatch) -> None:
    data, checkpoint = toy
    with pytest.raises(ConfigError):
        EvaluateConfig(weights="none", data=str(data))
    with pytest.raises(ConfigError):
        EvaluateConfig(weights=str(checkpoint), data=str(data), device="tpu")
    assert images_to_score(data, "val", None) == 12 and images_to_score(data, "val", 5) == 5
    assert images_to_score(data, "missing", None) == 0
    assert not is_long(data, "val", None)
    monkeypatch.setenv("DLGUIDE_EVAL_INLINE_MAX", "11")
    assert is_long(data, "val", None) and not is_long(data, "val", 11)


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_cli_detach_queues_a_job_and_jobs_show_holds_the_result(capsys, toy) -> None:
    data, checkpoint = toy
    args = ("evaluate", "--weights", str(checkpoint), "--data", str(data), "--batch-size", "4", "--limit", "9",
            "--device", "cpu", "--json")
    code, out, _ = _cli(capsys, *args, "--detach")
    assert code == 0 and set(json.loads(out)) == {"job_id"}
    job_id = json.loads(out)["job_id"]
    store = JobStore()
    job = wait_until_done(store, job_id, timeout=120)  # a real detached process
    assert job.status == "succeeded", job.log_path.read_text()
    code, out, _ = _cli(capsys, "jobs", "show", job_id, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["recipe"] == EVALUATE_RECIPE and shown["warnings"] == []
    code, out, _ = _cli(capsys, *args)  # the inline command: unchanged, same numbers
    assert code == 0 and _without_timings(shown["evaluation"]) == _without_timings(json.loads(out))
    code, out, _ = _cli(capsys, "jobs", "show", job_id)
    assert code == 0 and "top-1" in out
    code, out, _ = _cli(capsys, "jobs", "list", "--json")
    assert [row["recipe"] for row in json.loads(out)] == [EVALUATE_RECIPE]


def test_cli_detach_refuses_what_cannot_run(capsys, toy, tmp_path) -> None:
    data, checkpoint = toy
    code, _, err = _cli(capsys, "evaluate", "--weights", str(checkpoint), "--data", str(data), "--split", "nope",
                        "--detach")
    assert code == 2 and "no nope/ folder" in err
    code, _, err = _cli(capsys, "evaluate", "--weights", str(checkpoint), "--data", str(data), "--device", "tpu",
                        "--detach")
    assert code == 2 and "device must be" in err
    assert JobStore().list_jobs() == []
