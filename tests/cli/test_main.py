"""The CLI contracts of issue 2: devices --json, classify --json and its exit codes."""

import argparse
import json
import subprocess
import sys

import pytest

from dlguide_core.cli.common import download_progress, positive_int
from dlguide_core.cli.main import main
from tests.support.paths import ROOT


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_devices_json(capsys):
    code, out, _ = run_cli(capsys, "devices", "--json", "--no-tensorflow")
    data = json.loads(out)
    assert code == 0
    assert list(data) == ["torch", "torchvision", "backend", "hip_version", "cuda_version", "devices", "migraphx",
                          "migraphx_detail", "onnxruntime_providers", "tensorflow", "smi", "checks", "migraphx_targets"]
    assert all(list(check) == ["name", "passed", "detail"] for check in data["checks"]) and data["checks"]
    assert all(list(t) == ["precisions", "exhaustive_tune", "error"] for t in data["migraphx_targets"].values())


def test_classify_json_all_good_exits_0(capsys, sample_jpeg):
    code, out, err = run_cli(capsys, "classify", str(sample_jpeg), str(sample_jpeg), "--weights", "none",
                             "--top", "3", "--json")
    data = json.loads(out)
    assert code == 0 and len(data) == 2
    assert data[0]["image"] == str(sample_jpeg)
    assert [set(t) for t in data[0]["top"]] == [{"label", "index", "prob"}] * 3
    assert "untrained" in err


def test_classify_json_keeps_order_and_exits_1_on_a_bad_image(capsys, sample_jpeg, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_text("not an image")
    code, out, _ = run_cli(capsys, "classify", str(bad), str(sample_jpeg), "--weights", "none", "--json")
    data = json.loads(out)
    assert code == 1
    assert data[0]["image"] == str(bad) and "top" not in data[0] and "not an image" in data[0]["error"]
    assert data[0]["backend"] == "torch" and data[0]["weights"] == "none"
    assert len(data[1]["top"]) == 5


def test_classify_imagenet_offline_without_cache_exits_3(capsys, sample_jpeg, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    code, out, err = run_cli(capsys, "classify", str(sample_jpeg), "--weights", "imagenet", "--json")
    assert code == 3 and out == ""
    assert "inception_v3_google-0cc3c7bd.pth" in err


def test_classify_bad_checkpoint_is_a_usage_error(capsys, sample_jpeg, tmp_path):
    code, _, err = run_cli(capsys, "classify", str(sample_jpeg), "--weights", str(tmp_path / "missing.pt"))
    assert code == 2 and "not found" in err


@pytest.mark.parametrize("argv", [["classify"], ["classify", "x.jpg", "--top", "0"],
                                  ["classify", "x.jpg", "--batch-size", "two"], ["nonsense"]])
def test_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2


@pytest.mark.slow
def test_module_entry_point_and_parity_with_the_guide(fake_imagenet, sample_jpeg):
    """`python -m dlguide_core classify` in a real process agrees with the guide's snippet."""
    import torch
    from torchvision.models import inception_v3

    from tests.support.guide import guide_snippet

    proc = subprocess.run([sys.executable, "-m", "dlguide_core", "classify", str(sample_jpeg), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(proc.stdout)
    reference = inception_v3(weights=None, aux_logits=True, transform_input=True, init_weights=False)
    reference.load_state_dict(torch.load(fake_imagenet, weights_only=True))
    ids, probs = guide_snippet(reference.eval(), sample_jpeg)
    assert [t["index"] for t in entry["top"]] == ids
    assert max(abs(t["prob"] - p) for t, p in zip(entry["top"], probs)) <= 1e-4


def test_positive_int_accepts_one_and_up():
    assert positive_int("3") == 3
    for bad, message in (("0", "at least 1"), ("-2", "at least 1"), ("x", "integer")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            positive_int(bad)


def test_download_progress_draws_one_line_on_a_terminal_only(capsys, monkeypatch):
    assert download_progress("weights") is None  # captured stderr is no terminal: no \r spam in logs
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    show = download_progress("weights")
    show(50, 200)
    show(3 * 2**20, 0)  # no Content-Length: MiB so far
    assert capsys.readouterr().err == "\rdownloading weights  25.0%\rdownloading weights 3.0 MiB"


def test_a_closed_pipe_exits_quietly(capsys, monkeypatch):
    """`jobs export ID --csv | head`: the reader leaves; no traceback, the shell's SIGPIPE status (issue 18)."""
    import sys

    class ClosedPipe:
        def write(self, _text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            raise ValueError("no descriptor")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    code = main(["devices", "--json", "--no-tensorflow"])
    assert code == 141 and capsys.readouterr().err == ""


def test_a_path_component_too_long_is_one_line(capsys, tmp_path):
    long = tmp_path / ("a" * 300)
    code = main(["prepare", "tiny-imagenet", str(long)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "File name too long" in err


# --- Issue 23: `train` and `evaluate` generate their flags from the config fields' declarations. The flags, their
# defaults and their help are contracts (README): renaming a config field must not rename a flag.
TRAIN_FLAGS = {  # flag -> (metavar, default)
    "--epochs": ("N", None), "--batch-size": ("B", None), "--lr": ("LR", None), "--image-size": ("S", None),
    "--max-steps": ("N", None), "--weights": ("imagenet|none|PATH", None), "--workers": ("N", None),
    "--device": (None, None), "--amp": (None, None), "--amp-dtype": (None, None), "--channels-last": (None, None),
    "--label-smoothing": ("X", None), "--seed": ("N", None), "--nproc-per-node": ("N", None),
    "--nnodes": ("M", None), "--node-rank": ("K", 0), "--rdzv-endpoint": ("HOST:PORT", None),
    "--max-restarts": ("R", None), "--sync-batchnorm": (None, None), "--scale-lr": (None, None),
}
EVALUATE_FLAGS = {"--weights": ("{imagenet,PATH}", None), "--data": ("DIR", None), "--split": (None, "val"),
                  "--batch-size": ("B", 32), "--limit": ("N", None), "--device": (None, None)}


def _subcommand(name: str) -> argparse.ArgumentParser:
    from dlguide_core.cli.main import build_parser

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices[name]


@pytest.mark.parametrize(("command", "flags"), [("train", TRAIN_FLAGS), ("evaluate", EVALUATE_FLAGS)])
def test_generated_flags_keep_their_names_metavars_and_defaults(command, flags):
    actions = {s: a for a in _subcommand(command)._actions for s in a.option_strings}
    assert {flag: (actions[flag].metavar, actions[flag].default) for flag in flags if flag in actions} == flags
    assert actions["--device"].choices == (("auto", "cpu", "cuda") if command == "train" else None)
    if command == "train":
        assert actions["--amp-dtype"].choices == ("bf16", "fp16") and actions["--amp"].nargs == 0
