"""CLI contracts: `prepare`, `train`, `jobs` (flags, JSON keys, exit codes)."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.store import JobStore
from tests.support.tiny_imagenet import tree, write_tiny_imagenet
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_until_done


def cli_json(capsys, *argv: str):
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_prepare_json_is_idempotent_and_refuses_broken_layouts(tmp_path: Path, capsys) -> None:
    root = write_tiny_imagenet(tmp_path / "tin")
    code, first = cli_json(capsys, "prepare", "tiny-imagenet", str(root), "--json")
    assert code == 0 and (first["moved"], first["already_in_place"], first["classes"]) == (6, 0, 3)
    code, second = cli_json(capsys, "prepare", "tiny-imagenet", str(root), "--json")
    assert code == 0 and (second["moved"], second["already_in_place"]) == (0, 6)
    broken = write_tiny_imagenet(tmp_path / "broken")
    (broken / "val" / "images" / "val_0.JPEG").unlink()
    before = tree(broken)
    assert main(["prepare", "tiny-imagenet", str(broken)]) == 1
    assert "nothing was moved" in capsys.readouterr().err and tree(broken) == before


def test_train_foreground_then_jobs_show_list_and_export(tmp_path: Path, capsys) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=4, val_per_class=1)
    assert main(["train", "--recipe", "cifar_net", "--data", str(data), "--epochs", "2", "--workers", "0",
                 "--device", "cpu", "--seed", "3", "--amp", "--amp-dtype", "fp16", "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["status"] == "succeeded" and Path(result["checkpoint"]).is_file()
    assert "global batch 4 (4 per device x 1 process x 1 machine)" in captured.err
    code, shown = cli_json(capsys, "jobs", "show", result["job_id"], "--json")
    for key in ("id", "status", "recipe", "pid", "config", "error", "checkpoint", "last_step", "epochs"):
        assert key in shown, key
    assert shown["config"]["amp"] and shown["config"]["amp_dtype"] == "float16"
    assert shown["planned_epochs"] == 2 and isinstance(shown["epochs"], list)
    per_class = shown["per_class_accuracy"]
    assert list(per_class) == ["class_0", "class_1"] and all(0.0 <= v <= 100.0 for v in per_class.values())
    assert per_class == shown["epochs"][-1]["per_class"]  # the last epoch's, from the val set
    assert main(["jobs", "show", result["job_id"]]) == 0
    text = capsys.readouterr().out
    assert "per-class accuracy (last epoch):" in text
    assert f"class_1  {per_class['class_1']:5.1f} %" in text
    assert set(shown["last_step"]) >= {"step", "epoch", "loss", "lr", "images_per_s", "time"}
    assert shown["last_step"]["step"] == 4 and shown["config"]["seed"] == 3
    assert [{k: e[k] for k in ("epoch",)} for e in shown["epochs"]] == [{"epoch": 0}, {"epoch": 1}]
    assert set(shown["epochs"][0]) >= {"epoch", "train_loss", "val_loss", "top1", "top5"}
    code, listed = cli_json(capsys, "jobs", "list", "--json")
    assert [j["id"] for j in listed] == [result["job_id"]]
    assert main(["jobs", "export", result["job_id"], "--csv"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 5  # header + 4 steps
    assert main(["classify", "dlguide_core/samples/chelsea.jpg", "--weights", result["checkpoint"]]) == 0


def test_train_refuses_bad_settings_with_exit_code_2(tmp_path: Path, capsys) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)
    assert main(["train", "--recipe", "inception_v3", "--data", str(data), "--image-size", "32"]) == 2
    assert "at least 75" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["train", "--recipe", "resnet", "--data", str(data)])
    assert exc.value.code == 2


def test_amp_dtype_defaults_to_bf16_and_is_stored_in_the_config(tmp_path: Path) -> None:
    from dlguide_core.cli.main import build_parser
    from dlguide_core.cli.train import build_config

    args = build_parser().parse_args(["train", "--recipe", "cifar_net", "--data", str(tmp_path), "--amp"])
    assert build_config(args).amp_dtype == "bfloat16"
    args = build_parser().parse_args(["train", "--recipe", "inception_v3", "--data", str(tmp_path),
                                      "--amp-dtype", "fp16"])
    assert build_config(args).amp_dtype == "float16" and not build_config(args).channels_last
    args = build_parser().parse_args(["train", "--recipe", "inception_v3", "--data", str(tmp_path), "--amp",
                                      "--channels-last"])
    assert build_config(args).channels_last and build_config(args).amp
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--recipe", "cifar_net", "--data", str(tmp_path), "--amp-dtype", "fp8"])


def test_tf_recipe_without_tensorflow_exits_2_with_the_reason(tmp_path: Path, capsys, monkeypatch) -> None:
    from dlguide_core.tf import configs as tf_configs
    from dlguide_core.tf import runtime as tensorflow_runtime
    from dlguide_core.training import recipes

    reason = "TensorFlow is not installed, so the TensorFlow recipes are hidden: pip install tensorflow-cpu"
    monkeypatch.setattr(tensorflow_runtime, "tensorflow_status",
                        lambda: tensorflow_runtime.TensorFlowStatus(False, reason))
    monkeypatch.setattr(recipes, "_REGISTRY", {n: r for n, r in recipes._REGISTRY.items()
                                               if n not in tf_configs.TENSORFLOW_RECIPES})  # as on a host without TF
    for name in tf_configs.TENSORFLOW_RECIPES:
        assert main(["train", "--recipe", name, "--data", str(tmp_path)]) == 2
        assert capsys.readouterr().err.strip() == f"error: {reason}"
    assert JobStore().list_jobs() == []


def test_sync_batchnorm_on_a_cpu_job_is_refused_before_it_is_queued(tmp_path: Path, capsys, monkeypatch) -> None:
    import torch

    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)
    base = ["train", "--recipe", "cifar_net", "--data", str(data), "--nproc-per-node", "2", "--sync-batchnorm"]
    assert main([*base, "--device", "cpu"]) == 2
    assert "sync batchnorm needs GPUs" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(base) == 2  # device auto on a machine without GPUs
    err = capsys.readouterr().err
    assert "sync batchnorm needs GPUs" in err and len(err.strip().splitlines()) == 1
    assert JobStore().list_jobs() == []


@pytest.mark.slow
def test_train_detach_json_returns_at_once_and_the_job_runs(tmp_path: Path, capsys) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=4, val_per_class=1)
    started = time.monotonic()
    code, out = cli_json(capsys, "train", "--recipe", "cifar_net", "--data", str(data), "--epochs", "1",
                         "--workers", "0", "--detach", "--json")
    assert code == 0 and list(out) == ["job_id"] and time.monotonic() - started < 30
    assert wait_until_done(JobStore(), out["job_id"], timeout=120).status == "succeeded"
    assert main(["jobs", "resume", out["job_id"]]) == 1  # a finished job cannot be resumed
    assert "only cancelled, interrupted, failed" in capsys.readouterr().err


@pytest.mark.slow
def test_jobs_cancel_and_resume_detach_through_the_cli(tmp_path: Path, capsys) -> None:
    """`jobs cancel ID` stops a running job with a checkpoint; `jobs resume ID --detach` finishes it."""
    from tests.support.waiting import wait_for

    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=40, val_per_class=1)
    code, out = cli_json(capsys, "train", "--recipe", "cifar_net", "--data", str(data), "--epochs", "50",
                         "--workers", "0", "--batch-size", "1", "--detach", "--json")
    job_id = out["job_id"]
    store = JobStore()
    wait_for(lambda: (store.get(job_id).status == "running" and store.last_step(job_id) is not None))
    assert main(["jobs", "cancel", job_id]) == 0
    wait_for(lambda: store.get(job_id).status == "cancelled")
    stopped_at = store.get(job_id).checkpoint_step
    assert stopped_at and Path(store.get(job_id).checkpoint).is_file()
    capsys.readouterr()
    assert main(["jobs", "resume", job_id, "--detach"]) == 0
    wait_for(lambda: store.get(job_id).status == "running")
    wait_for(lambda: (store.last_step(job_id) or {}).get("step", 0) > stopped_at)
    assert main(["jobs", "cancel", job_id]) == 0  # no need to run all 50 epochs
    wait_for(lambda: store.get(job_id).status == "cancelled")
    steps = store.steps(job_id)["step"]
    assert steps == sorted(set(steps)) and steps[-1] > stopped_at  # numbering continued, no repeats


def test_data_is_required_for_pytorch_recipes_only(capsys) -> None:
    """`--data` may be left out for the TensorFlow recipes: keras.datasets / the IMDB download, online."""
    assert main(["train", "--recipe", "cifar_net"]) == 2
    assert "--data DIR is required for cifar_net" in capsys.readouterr().err
    assert main(["train", "--recipe", "cifar_net", "--data", ""]) == 2
    assert main(["train", "--recipe", "tf_fashion_mnist", "--nnodes", "2", "--node-rank", "1",
                 "--rdzv-endpoint", "head:29500"]) == 2  # another machine joins a run with its own data
    assert "--data DIR is required" in capsys.readouterr().err
    assert JobStore().list_jobs() == []


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_tf_recipe_without_data_downloads_and_offline_fails_with_what_to_fetch(capsys) -> None:
    code, out = cli_json(capsys, "train", "--recipe", "tf_fashion_mnist", "--detach", "--json")
    assert code == 0
    store = JobStore()
    job = store.get(out["job_id"])
    assert job.config["data"] == ""  # the recipe's own download
    job = wait_until_done(store, out["job_id"], timeout=180)
    assert job.status == "failed"  # tests run with DLGUIDE_OFFLINE=1
    assert "Fashion-MNIST is not available offline" in job.error and "idx" in job.error


def test_a_bad_rendezvous_endpoint_exits_2_at_submit_and_queues_nothing(tmp_path: Path, capsys) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)
    assert main(["train", "--recipe", "cifar_net", "--data", str(data), "--nnodes", "2",
                 "--rdzv-endpoint", "node0:", "--detach"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: a multi-node run needs --rdzv-endpoint HOST:PORT") and "\n" not in err
    assert JobStore().list_jobs() == []


def test_jobs_show_json_lists_warnings_for_a_diverged_run(capsys) -> None:
    """An added `warnings` list (one line each, with a hint); the status is left alone."""
    store = JobStore()
    for losses in ([2.3, 2.2, 2.1, 2.0, 1.9, 1.8], [2.4, 2.9, 3.6, 4.4, 5.9, 7.1, 8.8, 10.4, 12.2, 14.0, 16.1, 17.7]):
        job = store.create("inception_v3", "pytorch", {"lr": 0.1, "weights": "none", "epochs": 1})
        store.add_steps([(job.id, s, 0, v, 0.1, 8.0, time.time() + s, None) for s, v in enumerate(losses, 1)])
        store.finish(job.id, "succeeded")
        code, data = cli_json(capsys, "jobs", "show", job.id, "--json")
        assert code == 0 and data["status"] == "succeeded"
        if losses[0] == 2.3:
            assert data["warnings"] == []
    (warning,) = data["warnings"]
    assert "the loss rose from" in warning and "from random init try 0.01" in warning
    assert main(["jobs", "show", job.id]) == 0
    assert f"warning: {warning}" in capsys.readouterr().out
    store.add_steps([(job.id, 13, 0, float("nan"), 0.1, 8.0, time.time() + 13, None)])  # then NaN (Keras)
    assert main(["jobs", "show", job.id]) == 0
    out = capsys.readouterr().out
    assert "step 13/?  epoch 1  loss NaN" in out and "warning: the loss became NaN at step 13 of 13" in out


def test_dataset_paths_outside_the_data_roots_exit_2_when_roots_are_set(tmp_path: Path, capsys, monkeypatch) -> None:
    """README: exit 2 for a path outside the data roots. `train --data` and `prepare DIR` name datasets."""
    roots, outside = tmp_path / "roots", tmp_path / "elsewhere"
    (roots / "escape").parent.mkdir()
    outside.mkdir()
    (roots / "escape").symlink_to(outside)  # a link inside a root that leads out of it
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(roots))
    for argv in (["train", "--recipe", "cifar_net", "--data", str(outside), "--epochs", "1"],
                 ["train", "--recipe", "cifar_net", "--data", str(roots / "escape")],
                 ["train", "--recipe", "cifar_net", "--data", str(outside), "--nnodes", "2", "--node-rank", "1",
                  "--rdzv-endpoint", "head:29500"],
                 ["prepare", "cifar10", str(outside)], ["prepare", "tiny-imagenet", str(roots / "escape")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "is outside the configured data roots" in err and "\n" not in err
    assert JobStore().list_jobs() == []
    assert main(["prepare", "cifar10", str(roots / "cifar")]) == 1  # inside: checked, then "no CIFAR-10 here"
    assert "is outside" not in capsys.readouterr().err
    monkeypatch.delenv("DLGUIDE_DATA_ROOTS")  # unset: the CLI takes any folder its user names
    assert main(["prepare", "cifar10", str(outside)]) == 1 and "is outside" not in capsys.readouterr().err
