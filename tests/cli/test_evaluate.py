"""The `evaluate` CLI contract: flags, JSON keys, exit codes (2 usage, 3 ImageNet weights offline)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from dlguide_core.cli.main import main
from tests.support.checkpoints import toy_checkpoint
from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset

KEYS = {"top1", "top5", "loss", "per_class", "confusion", "images", "images_per_s"}


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def toy(tmp_path: Path) -> tuple[Path, Path]:
    data = write_toy_dataset(tmp_path / "toy", classes=3, per_class=1, val_per_class=3)
    return data, toy_checkpoint(tmp_path / "c.pt", ("class_0", "class_1", "class_2"))


def test_evaluate_json_keys(capsys, toy) -> None:
    data, checkpoint = toy
    code, out, _ = run_cli(capsys, "evaluate", "--weights", str(checkpoint), "--data", str(data),
                           "--split", "val", "--batch-size", "4", "--limit", "6", "--json")
    result = json.loads(out)
    assert code == 0 and KEYS <= set(result)
    assert result["images"] == 6 and result["restricted"] is False
    assert result["confusion"]["classes"] == ["class_0", "class_1", "class_2"]
    assert sum(map(sum, result["confusion"]["matrix"])) == 6
    assert set(result["per_class"]) == {"class_0", "class_1", "class_2"}
    assert all(0 <= v <= 100 for v in result["per_class"].values())


def test_evaluate_text(capsys, toy) -> None:
    data, checkpoint = toy
    code, out, _ = run_cli(capsys, "evaluate", "--weights", str(checkpoint), "--data", str(data))
    assert code == 0 and "top-1" in out and "9 images" in out and "class_2" in out


def test_imagenet_offline_without_cache_exits_3(capsys, toy, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    code, out, err = run_cli(capsys, "evaluate", "--weights", "imagenet", "--data", str(toy[0]), "--json")
    assert code == 3 and out == "" and "inception_v3_google-0cc3c7bd.pth" in err


@pytest.mark.slow
def test_imagenet_on_synset_data_is_a_restricted_score(capsys, fake_imagenet, tmp_path) -> None:
    for wnid, colour in (("n01443537", (230, 120, 20)), ("n02124075", (120, 110, 100))):
        (tmp_path / "tiny" / "val" / wnid).mkdir(parents=True)
        Image.new("RGB", (64, 64), colour).save(tmp_path / "tiny" / "val" / wnid / "a.png")
    code, out, _ = run_cli(capsys, "evaluate", "--weights", "imagenet", "--data", str(tmp_path / "tiny"), "--json")
    result = json.loads(out)
    assert code == 0 and result["restricted"] is True and "restricted-label score" in result["note"]
    assert result["confusion"]["classes"] == ["n01443537", "n02124075"] and result["images"] == 2


@pytest.mark.parametrize("argv, message", [
    (["--weights", "none"], "random model"),
    (["--weights", "{ck}", "--data", "{missing}"], "is not a folder"),
    (["--weights", "{ck}", "--split", "train2"], "no train2/ folder"),
    (["--weights", "{missing}"], "not found"),
    (["--weights", "imagenet-ish"], "not found"),
    (["--weights", "{ck}", "--device", "cuda:x"], "device must be one of auto, cpu, cuda or cuda:N, not 'cuda:x'"),
    (["--weights", "{ck}", "--device", "tpu", "--detach"], "device must be one of auto, cpu, cuda or cuda:N"),
])
def test_usage_errors_exit_2(capsys, toy, tmp_path, argv, message) -> None:
    data, checkpoint = toy
    argv = [a.format(ck=checkpoint, missing=tmp_path / "missing") for a in argv]
    if "--data" not in argv:
        argv += ["--data", str(data)]
    code, out, err = run_cli(capsys, "evaluate", *argv)
    assert code == 2 and out == "" and message in err


def test_wrong_classes_and_bad_flags_exit_2(capsys, toy, tmp_path) -> None:
    data, _ = toy
    other = toy_checkpoint(tmp_path / "other.pt", ("cat", "dog"))
    code, _, err = run_cli(capsys, "evaluate", "--weights", str(other), "--data", str(data))
    assert code == 2 and "not trained on class" in err
    for bad in (["--limit", "0"], ["--batch-size", "x"], []):
        with pytest.raises(SystemExit) as exc:
            main(["evaluate", "--data", str(data), *bad] + (["--weights", "imagenet"] if bad else []))
        assert exc.value.code == 2


def test_the_command_module_does_not_import_torch() -> None:
    """`--help` stays light: torch is imported inside the handler only."""
    code = "import sys\nimport dlguide_core.cli.evaluate\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("detach", [[], ["--detach"]])
def test_data_and_split_honour_the_data_roots(capsys, toy, tmp_path, monkeypatch, detach) -> None:
    """Issue 18: `--split ../..` escaped DLGUIDE_DATA_ROOTS, inline and detached; so did a symlinked split."""
    data, checkpoint = toy
    root = tmp_path / "root"
    root.mkdir()
    inside = root / "toy"
    inside.symlink_to(data, target_is_directory=True)  # a dataset reached through a link out of the root
    monkeypatch.setenv("DLGUIDE_DATA_ROOTS", str(root))
    argv = ["evaluate", "--weights", str(checkpoint), *detach]
    assert run_cli(capsys, *argv, "--data", str(data))[0] == 2  # outside the roots
    assert run_cli(capsys, *argv, "--data", str(inside))[0] == 2  # resolved before the check
    (root / "real").mkdir()
    (root / "real" / "train").mkdir()
    code, out, err = run_cli(capsys, *argv, "--data", str(root / "real"), "--split", "../..")
    assert code == 2 and out == "" and "--split must be a folder name" in err
    (root / "real" / "val").symlink_to(data / "val", target_is_directory=True)
    code, out, err = run_cli(capsys, *argv, "--data", str(root / "real"), "--split", "val")
    assert code == 2 and "outside the configured data roots" in err
