"""The AMD rule for Ray, checked against the installed Ray's own check (ray/_private/accelerators/amd_gpu.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dlguide_core.jobs.executors import ray_amd
from tests.support.paths import ROOT


@pytest.mark.parametrize(("environ", "expected"), [
    ({"ROCR_VISIBLE_DEVICES": "2,3"}, {"HIP_VISIBLE_DEVICES": "0,1"}),  # HIP numbers ROCr's devices from 0
    ({"ROCR_VISIBLE_DEVICES": "GPU-aa,GPU-bb,GPU-cc"}, {"HIP_VISIBLE_DEVICES": "0,1,2"}),  # uuids count the same
    ({"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"}, {}),  # both set: the binding is the user's
    ({"HIP_VISIBLE_DEVICES": "4"}, {}),
    ({}, {}),
])
def test_amd_rule_sets_hip_only_when_rocr_alone_is_set(environ, expected) -> None:
    assert ray_amd.amd_visible_devices(environ) == expected


def test_the_rule_satisfies_rays_amd_check(monkeypatch) -> None:
    """Ray 2.60 refuses ROCR_VISIBLE_DEVICES alone (the error Slurm's AMD nodes hit); with the rule applied it
    accepts the environment and sees the devices Slurm gave, numbered from 0."""
    amd = pytest.importorskip("ray._private.accelerators.amd_gpu")
    manager = amd.AMDGPUAcceleratorManager
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "2,3")
    with pytest.raises(RuntimeError, match="HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES"):
        manager.get_current_process_visible_accelerator_ids()
    for name, value in ray_amd.amd_visible_devices(os.environ).items():
        monkeypatch.setenv(name, value)
    assert manager.get_current_process_visible_accelerator_ids() == ["0", "1"]
    assert os.environ["ROCR_VISIBLE_DEVICES"] == "2,3"  # Slurm's binding untouched


def test_the_module_prints_the_export_line_for_ray_start() -> None:
    env = {k: v for k, v in os.environ.items() if k != "HIP_VISIBLE_DEVICES"}
    run = subprocess.run([sys.executable, "-m", "dlguide_core.jobs.executors.ray_amd"], cwd=ROOT, text=True,
                         capture_output=True, env={**env, "ROCR_VISIBLE_DEVICES": "4,5,6"}, timeout=60)
    assert (run.returncode, run.stdout) == (0, "export HIP_VISIBLE_DEVICES=0,1,2\n")
    quiet = subprocess.run([sys.executable, "-m", "dlguide_core.jobs.executors.ray_amd"], cwd=ROOT, text=True,
                           capture_output=True, env={k: v for k, v in env.items() if k != "ROCR_VISIBLE_DEVICES"},
                           timeout=60)
    assert (quiet.returncode, quiet.stdout) == (0, "")
