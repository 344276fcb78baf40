"""TensorBoard event files read back with tensorboard's own EventAccumulator, compared with the store."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs import queue
from dlguide_core.jobs.runner import run_job
from dlguide_core.jobs.store import JobStore
from dlguide_core.jobs.tensorboard_export import export_job, job_logdir, job_sink
from dlguide_core.training.recipes import get_recipe
from dlguide_core.training.tensorboard import EPOCH_TAGS, STEP_TAGS
from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset


def read_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)], through tensorboard's reader (every event kept, not a reservoir sample)."""
    from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(logdir), size_guidance={TENSORS: 0})
    acc.Reload()
    return {tag: [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
            for tag in acc.Tags()["tensors"]}


def expected_from_store(store: JobStore, job_id: str) -> dict[str, list[tuple[int, float]]]:
    cols = store.steps(job_id)
    out = {tag: [(s, v) for s, v in zip(cols["step"], cols[col]) if v is not None] for col, tag in STEP_TAGS.items()}
    for col, tag in EPOCH_TAGS.items():
        out[tag] = [(e["epoch"], e[col]) for e in store.epochs(job_id) if e[col] is not None]
    return {tag: rows for tag, rows in out.items() if rows}


def assert_same(actual: dict, expected: dict) -> None:
    for tag, rows in expected.items():
        assert [s for s, _ in actual[tag]] == [s for s, _ in rows], tag
        for (_, a), (_, b) in zip(actual[tag], rows):
            assert a == pytest.approx(b, rel=1e-6) or (math.isnan(a) and math.isnan(b)), tag


def test_export_of_an_old_job_matches_the_store(tmp_path: Path, capsys) -> None:
    store = JobStore()
    job = store.create("tf_fashion_mnist", "tensorflow", {})
    store.add_steps([(job.id, s, 0, 2.0 / s, 0.01, 100.0 + s, 1000.0 + s, f'{{"accuracy": {0.1 * s}}}')
                     for s in range(1, 6)])
    store.add_epoch(job.id, 0, {"train_loss": 0.9, "val_loss": 0.8, "top1": 71.5, "top5": 97.0, "lr": 0.01})
    assert main(["jobs", "export", job.id, "--tensorboard", str(tmp_path / "tb")]) == 0
    assert str(tmp_path / "tb" / job.id) in capsys.readouterr().out
    scalars = read_scalars(tmp_path / "tb" / job.id)
    assert_same(scalars, expected_from_store(store, job.id))
    assert scalars["train/accuracy"] == [(s, pytest.approx(10.0 * s)) for s in range(1, 6)]  # percent, as the app
    assert scalars["epoch/lr"] == [(0, pytest.approx(0.01))]  # TensorBoard keeps float32
    export_job(store, job.id, tmp_path / "tb" / job.id)  # again: replaced, not doubled
    assert len(read_scalars(tmp_path / "tb" / job.id)["train/loss"]) == 5
    assert len(list((tmp_path / "tb" / job.id).glob("events.out.tfevents.*"))) == 1


def test_export_usage(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:  # --csv or --tensorboard, exactly one
        main(["jobs", "export", "x"])
    assert exc.value.code == 2
    assert main(["jobs", "export", "nope", "--tensorboard", str(tmp_path)]) == 1  # unknown job: JobError
    assert not (tmp_path / "nope").exists()


def test_sink_mirrors_steps_and_epochs_and_a_resume_drops_redone_steps(tmp_path: Path) -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    sink = job_sink(store.url, job.id, flush_s=0.05)
    sink.on_start(total_steps=6, epochs=2, start_step=0, start_epoch=0)
    for s in range(1, 7):
        sink.on_step(s, (s - 1) // 3, 1.0 / s, 0.1, 50.0)
    sink.on_epoch(0, {"train_loss": 0.5, "val_loss": 0.6, "top1": 50.0, "top5": 100.0, "per_class": {"a": 1}})
    sink.close()
    first = read_scalars(job_logdir(job.id))
    assert [s for s, _ in first["train/loss"]] == [1, 2, 3, 4, 5, 6]
    assert first["epoch/top1"] == [(0, 50.0)] and sink.failed is None
    # A resume from step 3: the store was trimmed to it (StoreSink.on_start), then the files follow.
    store.add_steps([(job.id, s, 0, 1.0 / s, 0.1, 50.0, 1000.0 + s, None) for s in (1, 2, 3)])
    resumed = job_sink(store.url, job.id, flush_s=0.05)
    resumed.on_start(total_steps=6, epochs=2, start_step=3, start_epoch=1)
    resumed.on_step(4, 1, 0.2, 0.1, 50.0)
    resumed.close()
    assert [s for s, _ in read_scalars(job_logdir(job.id))["train/loss"]] == [1, 2, 3, 4]


@pytest.mark.slow
def test_a_real_job_writes_event_files_equal_to_its_store_rows(tmp_path: Path) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=10, val_per_class=2)
    cfg = get_recipe("cifar_net").make_config(data=str(data), workers=0, device="cpu", lr=0.01, epochs=2)
    store = JobStore()
    job = queue.submit(store, "cifar_net", cfg, start=False)
    store.claim(job.id, os.getpid())
    assert run_job(store, job.id) == "succeeded"
    expected = expected_from_store(store, job.id)
    assert len(expected["train/loss"]) == 10 and len(expected["epoch/top1"]) == 2
    assert_same(read_scalars(job_logdir(job.id)), expected)


def test_the_writer_does_not_import_tensorflow(tmp_path: Path) -> None:
    code = ("import sys\nfrom pathlib import Path\nfrom dlguide_core.training.tensorboard import open_writer\n"
            f"w = open_writer(Path({str(tmp_path)!r}))\nw.add_scalar('x', 1.0, step=1)\nw.close()\n"
            "print('tensorflow' in sys.modules)")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False" and time.monotonic() - started < 30
