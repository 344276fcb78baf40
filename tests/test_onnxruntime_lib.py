"""ONNX Runtime through dlguide's door (dlguide_core/onnxruntime_lib.py): its telemetry off before it starts.

Each case runs a fresh interpreter with a HOME of its own, which creates and runs a real session: ONNX Runtime 1.29+
with telemetry on keeps a device id and an event database under ~/.cache/Microsoft (and uploads from a thread that
the process waits for at exit: the `docker stop` of tests/docker/test_image.py). The plain import is the control
that shows the check can fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlguide_core import onnxruntime_lib
from tests.support.paths import ROOT

ort = onnxruntime_lib.load()

# ONNX Runtime says no telemetry when it sees a CI service's variable; a user's machine has none of them.
CI_VARIABLES = ("CI", "TF_BUILD", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "TRAVIS", "JENKINS_URL",
                "CODEBUILD_BUILD_ID", "BUILDKITE", "TEAMCITY_VERSION", "APPVEYOR", "BITBUCKET_BUILD_NUMBER")

SESSION = """import sys
import numpy as np
import onnx
from onnx import TensorProto, helper
{load}
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
print(session.run(None, {{"x": np.array([-1.0, 2.0], dtype=np.float32)}})[0].tolist())
import os
print(os.environ.get("ORT_DISABLE_TELEMETRY"))
"""
THROUGH_THE_DOOR = "from dlguide_core import onnxruntime_lib\nort = onnxruntime_lib.load()"
PLAIN = "import onnxruntime as ort"


def _run(tmp_path: Path, load: str, **extra: str) -> tuple[list[str], Path]:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in CI_VARIABLES and k not in ("XDG_CACHE_HOME", onnxruntime_lib.TELEMETRY_ENV)}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), **extra)
    done = subprocess.run([sys.executable, "-c", SESSION.format(load=load)], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split("\n"), home / ".cache" / "Microsoft"


def test_a_session_through_the_door_keeps_no_device_id_and_says_telemetry_off(tmp_path: Path) -> None:
    lines, kept = _run(tmp_path, THROUGH_THE_DOOR)
    assert lines[:2] == ["[0.0, 2.0]", "1"]
    assert not kept.exists(), sorted(str(p) for p in kept.rglob("*"))


def test_the_users_own_setting_stands(tmp_path: Path) -> None:
    lines, _ = _run(tmp_path, THROUGH_THE_DOOR, ORT_DISABLE_TELEMETRY="0")
    assert lines[:2] == ["[0.0, 2.0]", "0"]


@pytest.mark.skipif(tuple(int(p) for p in ort.__version__.split(".")[:2]) < (1, 29),
                    reason="ONNX Runtime sends no telemetry from Linux before 1.29: no control to compare with")
def test_control_the_plain_import_keeps_a_device_id(tmp_path: Path) -> None:
    """Without the door, the same session leaves ONNX Runtime's device id in HOME: the check above can fail."""
    lines, kept = _run(tmp_path, PLAIN)
    assert lines[:2] == ["[0.0, 2.0]", "None"]
    assert any(p.name == "deviceid" for p in kept.rglob("*")), "this onnxruntime keeps no device id any more"
