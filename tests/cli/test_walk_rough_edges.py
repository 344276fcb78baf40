"""Issue 43, the newcomer's walk: the CLI's rough edges. A detached job whose ImageNet weights cannot be had is
refused at submission (one line, exit 3), not queued to fail; `jobs list` shows a job's error in one short
sentence, the whole of it staying in `jobs show`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlguide_core.cli.common import EXIT_WEIGHTS
from dlguide_core.cli.jobs import short_error
from dlguide_core.cli.main import main
from dlguide_core.jobs.store import JobStore
from tests.support.toy_data import write_toy_dataset

LONG_ERROR = ("ImageNet weights inception_v3_google-0cc3c7bd.pth are not cached and could not be downloaded "
              "(offline mode (DLGUIDE_OFFLINE) is set; cannot fetch https://x/y.pth). Download https://x/y.pth on a "
              "machine with internet and copy it to /root/.cache/torch/hub/checkpoints/y.pth (or set TORCH_HOME to "
              "the folder that holds checkpoints/). Then resume the job. It keeps its place.")


def test_a_detached_job_without_its_imagenet_weights_offline_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # nothing cached; DLGUIDE_OFFLINE=1 (conftest)
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)
    code = main(["train", "--recipe", "inception_v3", "--data", str(data), "--weights", "imagenet", "--detach",
                 "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == EXIT_WEIGHTS and err.count("\n") == 1 and "not cached" in err and "Traceback" not in err, err
    assert not (tmp_path / "dlguide_home").exists() or JobStore().list_jobs() == []  # nothing was queued


def test_cached_weights_or_none_need_no_fetch(tmp_path: Path, fake_imagenet) -> None:
    from dlguide_core.cli.train import _fetch_imagenet_weights
    from dlguide_core.jobs.catalog import get_recipe

    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)
    for weights in ("imagenet", "none"):  # offline (conftest): a fetch would raise
        _fetch_imagenet_weights("inception_v3", get_recipe("inception_v3").make_config(data=str(data),
                                                                                      weights=weights))


def test_jobs_list_shows_the_first_sentence_of_an_error(capsys) -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {"epochs": 1})
    store.claim(job.id, os.getpid())
    store.finish(job.id, "failed", LONG_ERROR)
    assert main(["jobs", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(job.id))
    assert row.endswith("  -  ImageNet weights inception_v3_google-0cc3c7bd.pth are not cached and could not be "
                        "downloaded (offlin ...") and "Download " not in row
    assert main(["jobs", "show", job.id]) == 0
    assert "It keeps its place." in capsys.readouterr().out  # the whole error, where one asks for one job


@pytest.mark.parametrize(("error", "shown"), [
    ("out of memory", "out of memory"), ("Killed. Resume it.", "Killed. ..."), ("a\nb", "a b"),
    ("x" * 150, "x" * 100 + " ...")])
def test_short_error(error: str, shown: str) -> None:
    assert short_error(error) == shown


@pytest.mark.parametrize(("epoch", "batch", "words"), [
    (2, 0, "after epoch 2"), (1, 7, "in epoch 2"), (0, 0, "before epoch 1"), (0, 3, "in epoch 1"),
    (None, None, "epoch ?")])
def test_a_checkpoints_epoch_is_counted_from_1_as_everywhere_else(epoch, batch, words: str) -> None:
    """`evaluate` and Classify name a checkpoint "(job ID, in epoch 2)": the number the job table and `jobs show`
    give that epoch (a checkpoint keeps the epoch it resumes, from 0)."""
    from dlguide_core.vision.models import epoch_words

    assert epoch_words(epoch, batch) == words
