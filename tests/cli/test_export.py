"""`export` and `bench` CLI commands: flags, JSON output and exit codes as the issue's contract says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import onnx
import pytest

from dlguide_core.cli.main import main
from dlguide_core.inference.backend_base import BackendError
from dlguide_core.inference.backend_onnxruntime import OnnxRuntimeBackend
from dlguide_core.inference.benchmark import ROW_KEYS


@pytest.fixture(scope="module")
def checkpoint(cifar_files: tuple[Path, Path]) -> Path:
    """The session's tiny CIFAR checkpoint; a test that also takes `cifar` finds its export already cached (the
    bench tests: the export is test_export_json_then_cached's subject)."""
    return cifar_files[0]


def test_export_json_then_cached(checkpoint, tmp_path, capsys):
    out = tmp_path / "model.onnx"
    assert main(["export", "--weights", str(checkpoint), "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["path"] == str(out) and out.is_file() and data["cached"] is False
    assert data["input_name"] == onnx.load(str(out)).graph.input[0].name
    assert data["class_names"] == 10 and data["preset"]["crop"] == 32
    assert main(["export", "--weights", str(checkpoint), "--out", str(tmp_path / "again.onnx")]) == 0
    assert "from the cache" in capsys.readouterr().out


def test_export_bad_checkpoint_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"nope")
    assert main(["export", "--weights", str(bad), "--out", str(tmp_path / "x.onnx")]) == 2
    assert "error:" in capsys.readouterr().err


def test_export_imagenet_offline_exits_3(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty_torch_home"))
    assert main(["export", "--weights", "imagenet", "--out", str(tmp_path / "x.onnx")]) == 3
    assert "ImageNet weights" in capsys.readouterr().err


def test_bench_unavailable_backend_is_an_error_row_and_exits_0(checkpoint, cifar, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "migraphx", None)
    code = main(["bench", "--weights", str(checkpoint), "--backends", "torch,onnxruntime,migraphx",
                 "--batch-sizes", "1,2", "--iters", "2", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0  # no MIGraphX here is a state the rows report, not a failure
    assert [(r["backend"], r["batch_size"]) for r in rows[:4]] == [("torch", 1), ("torch", 2),
                                                                   ("onnxruntime", 1), ("onnxruntime", 2)]
    assert all(list(r) == list(ROW_KEYS) for r in rows[:4])
    assert rows[4]["backend"] == "migraphx" and "not installed" in rows[4]["error"]
    assert list(rows[4]) == [*ROW_KEYS, "error"]


def test_bench_available_backend_failing_exits_1(checkpoint, cifar, monkeypatch, capsys):
    def broken_run(self, batch):
        raise BackendError("ONNX Runtime failed: device lost")

    monkeypatch.setattr(OnnxRuntimeBackend, "run", broken_run)
    code = main(["bench", "--weights", str(checkpoint), "--backends", "torch,onnxruntime", "--batch-sizes", "1",
                 "--iters", "1", "--warmup", "0", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 1
    assert "error" not in rows[0] and rows[0]["p50_ms"] > 0  # torch still produced numbers
    assert rows[1]["backend"] == "onnxruntime" and rows[1]["error"] == "ONNX Runtime failed: device lost"


def test_bench_with_no_backend_producing_numbers_exits_1(checkpoint, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "migraphx", None)
    assert main(["bench", "--weights", str(checkpoint), "--backends", "migraphx", "--batch-sizes", "1",
                 "--iters", "1"]) == 1
    assert "UNAVAILABLE" in capsys.readouterr().out


def test_bench_table_shows_the_speedup_over_torch(checkpoint, cifar, capsys, monkeypatch):
    from dlguide_core.inference import activity

    monkeypatch.setattr(activity, "cpu_sample", lambda: None)  # as on a quiet machine: no outside load to report
    assert main(["bench", "--weights", str(checkpoint), "--backends", "torch,onnxruntime", "--batch-sizes", "1",
                 "--iters", "1", "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    assert "CPUExecutionProvider" in out and "p50 ms" in out and "x torch" in out
    torch_line = next(line for line in out.splitlines() if line.startswith("torch "))
    assert torch_line.split()[-2] == "1.00x"  # x torch, then (issue 31) what disturbed the row: "-" for nothing
    assert out.splitlines()[1].split()[-1] == "disturbed" and torch_line.split()[-1] == "-"


def test_bench_help_states_the_exit_rule(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "Exit codes:" in out and "an available backend failed" in out and "torch,onnxruntime,migraphx" in out


@pytest.mark.parametrize("flag,value", [("--backends", "torch,tvm"), ("--batch-sizes", "1,x"), ("--iters", "0")])
def test_bench_bad_flags_exit_2(checkpoint, flag, value, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--weights", str(checkpoint), flag, value])
    assert exc.value.code == 2


def test_export_out_a_directory_is_a_usage_error_in_one_line(checkpoint, tmp_path, capsys):
    code = main(["export", "--weights", str(checkpoint), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "is a directory" in err
