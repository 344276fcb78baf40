"""Issue 33: `export --opset` outside what the exporter writes is refused (it silently wrote 18); N15: a killed
parent leaves no ~100 MB weights copy in exports/ (its child dies with it and the next export removes the rest)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from dlguide_core.cli.main import main
from dlguide_core.inference import export_files
from tests.support.checkpoints import toy_checkpoint
from tests.support.paths import ROOT
from tests.support.waiting import wait_for


@pytest.mark.parametrize("exporter, opset", [("dynamo", 1), ("dynamo", 17), ("dynamo", 99), ("torchscript", 99)])
def test_an_opset_the_exporter_cannot_write_is_refused(exporter, opset, tmp_path, capsys) -> None:
    assert main(["export", "--weights", "none", "--out", str(tmp_path / "m.onnx"), "--exporter", exporter,
                 "--opset", str(opset)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--opset {opset} is not supported by the {exporter} exporter" in err
    assert not (tmp_path / "m.onnx").exists()


def test_stale_temporaries_of_dead_owners_are_removed(isolated_home) -> None:
    folder = isolated_home / "exports"
    folder.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = export_files.owner_tag().split("@")[1]
    gone = [folder / f"a.onnx.pid{dead.pid}@{host}.x1.job", folder / f"a.onnx.pid{dead.pid}@{host}.x2.tmp"]
    kept = [folder / f"a.onnx.{export_files.owner_tag()}.x3.job",  # ours: alive
            folder / f"a.onnx.pid{dead.pid}@otherhost.x4.job",  # another host's: only after EXPORT_TIMEOUT_S
            folder / "a.onnx"]
    for path in gone + kept:
        path.write_bytes(b"x")
    assert sorted(export_files.remove_stale_temporaries(folder)) == sorted(gone)
    assert all(p.exists() for p in kept)


PARENT = """
import sys
from dlguide_core.inference.export import export_onnx
from dlguide_core.vision.models import load_model
export_onnx(load_model(sys.argv[1], device="cpu"), force=True)
"""


def test_killing_the_parent_of_an_export_leaves_no_weights_copy(isolated_home, tmp_path) -> None:
    weights = toy_checkpoint(tmp_path / "toy.pt", ("a", "b"))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(weights)], cwd=ROOT, env=os.environ.copy())
    try:
        folder = isolated_home / "exports"
        wait_for(lambda: folder.is_dir() and list(folder.glob("*.job")), timeout=180, every=0.02,
                 what="the export's job file")
        children = wait_for(lambda: psutil.Process(parent.pid).children(), timeout=60, every=0.02,
                            what="the export child")
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 120  # the child gets SIGTERM as its parent dies (PR_SET_PDEATHSIG)
        while any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children):
            assert time.monotonic() < deadline, "the export child outlived its parent"
            time.sleep(0.1)
        export_files.remove_stale_temporaries(folder)  # what the next export does first
        assert not list(folder.glob("*.job")) and not list(folder.glob("*.tmp"))
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
