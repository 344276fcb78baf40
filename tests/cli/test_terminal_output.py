"""N14 (issue 33): `jobs show`/`jobs list` print no terminal control codes from a dataset folder, a job's name or
an error; `classify --json` is always JSON (a NaN probability is null, with a warning)."""

from __future__ import annotations

import json

import torch

from dlguide_core.cli.main import main
from dlguide_core.jobs.store import JobStore
from dlguide_core.vision.checkpoints import load_checkpoint, save_checkpoint
from tests.support.checkpoints import toy_checkpoint
from tests.support.toy_data import write_toy_dataset

ESC = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"


def test_jobs_show_and_list_print_no_escape_codes(capsys) -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {"epochs": 1, "data": f"/data/cats{ESC}"}, name=f"run{ESC}")
    store.set_plan(job.id, 4, 1, (f"cat{ESC}", "dog\rx"))
    store.add_epoch(job.id, 0, {"train_loss": 1.0, "val_loss": 1.0, "top1": 50.0, "top5": 100.0,
                                "per_class_accuracy": {f"cat{ESC}": 50.0, "dog\rx": 50.0}})
    store.finish(job.id, "failed", f"no images in /data/cats{ESC}/train")
    for argv in (["jobs", "show", job.id], ["jobs", "list"]):
        assert main(argv) == 0
        out, err = capsys.readouterr()
        assert job.id in out and not {"\x1b", "\x07", "\r"} & set(out + err), repr(out)
    assert main(["jobs", "show", job.id]) == 0
    assert "cats?]0;pwned??[2J?[31m/train" in capsys.readouterr().out  # shown, defused
    assert main(["jobs", "show", job.id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == f"run{ESC}"  # JSON escapes it itself (\u001b)


def test_classify_json_never_emits_nan(tmp_path, capsys) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=1, val_per_class=1)
    path = toy_checkpoint(tmp_path / "ok.pt", ("a", "b"))
    checkpoint = load_checkpoint(path)
    checkpoint["model"] = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
                           for k, v in checkpoint["model"].items()}  # diverged weights
    save_checkpoint(tmp_path / "nan.pt", checkpoint)
    image = next((data / "val").rglob("*.png"))
    assert main(["classify", str(image), "--weights", str(tmp_path / "nan.pt"), "--json", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    (record,) = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # strict JSON
    assert ": NaN" not in out and record["top"][0]["prob"] is None and "NaN" in record["warning"]


def test_classify_and_evaluate_text_print_no_escape_codes_from_class_names(tmp_path, capsys) -> None:
    """Issue 43 (P10): a checkpoint's class names (from dataset folders) reached the terminal raw."""
    classes = (f"cat{ESC}", "dog\rx")
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=1, val_per_class=2)
    for split in ("train", "val"):
        for i, name in enumerate(classes):
            (data / split / f"class_{i}").rename(data / split / name)
    checkpoint = toy_checkpoint(tmp_path / "c.pt", classes)
    image = next((data / "val").rglob("*.png"))
    argvs = (["classify", str(image), "--weights", str(checkpoint), "--top", "2", "--device", "cpu"],
             ["evaluate", "--weights", str(checkpoint), "--data", str(data), "--device", "cpu"])
    for argv in argvs:
        assert main(argv) == 0
        out, err = capsys.readouterr()
        assert "cat?]0;pwned??[2J?[31m" in out and "dog?x" in out, out  # shown, defused
        assert not {"\x1b", "\x07", "\r"} & set(out + err), repr(out)
