"""dlguide installed like a Python tool (issue 42, item 0): `make install` puts the project into the venv (editable),
so the `dlguide` command and `python -m dlguide_core` run from any folder, and a detached job's own processes find
the package wherever the user stood."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset

DLGUIDE = Path(sys.executable).parent / "dlguide"


@pytest.fixture
def elsewhere(tmp_path: Path) -> dict[str, str]:
    """A folder outside the checkout, and an environment that does not point Python at the checkout."""
    assert ROOT not in tmp_path.parents
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return {**env, "DLGUIDE_HOME": str(tmp_path / "home")}


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_pyproject_declares_the_package_its_dependencies_and_the_command() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"] == {"dlguide": "dlguide_core.cli.main:main"}
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"
    assert project["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
    recipe = (ROOT / "Makefile").read_text().split("\n$(STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "--no-deps -e ." in recipe


def test_the_command_runs_from_a_folder_outside_the_checkout(tmp_path: Path, elsewhere: dict[str, str]) -> None:
    if not DLGUIDE.exists():
        pytest.fail(f"{DLGUIDE} is missing: `make install` installs the project (pip install -e .)")
    done = run([str(DLGUIDE), "devices", "--json"], tmp_path, elsewhere)
    assert done.returncode == 0, done.stderr
    assert "torch" in json.loads(done.stdout)
    module = run([sys.executable, "-m", "dlguide_core", "jobs", "list", "--json"], tmp_path, elsewhere)
    assert module.returncode == 0, module.stderr  # the contract: `python -m dlguide_core` works the same
    assert json.loads(module.stdout) == []
    usage = run([str(DLGUIDE), "--help"], tmp_path, elsewhere)  # the usage line names the command that was typed
    assert usage.returncode == 0 and usage.stdout.startswith("usage: dlguide "), usage.stdout[:200]
    assert run([sys.executable, "-m", "dlguide_core", "--help"], tmp_path, elsewhere).stdout.startswith(
        "usage: python -m dlguide_core ")


@pytest.mark.slow
def test_a_detached_job_started_elsewhere_runs_to_its_end(tmp_path: Path, elsewhere: dict[str, str]) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=4, val_per_class=1)
    started = run([str(DLGUIDE), "train", "--recipe", "cifar_net", "--data", "toy", "--epochs", "1",
                   "--batch-size", "4", "--detach", "--json"], tmp_path, elsewhere)
    assert started.returncode == 0, started.stderr
    job_id = json.loads(started.stdout)["job_id"]
    deadline = time.monotonic() + 240
    while True:
        shown = run([str(DLGUIDE), "jobs", "show", job_id, "--json"], tmp_path, elsewhere)
        job = json.loads(shown.stdout)
        if job["status"] not in ("queued", "running") or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert job["status"] == "succeeded", (job, run([str(DLGUIDE), "jobs", "logs", job_id], tmp_path, elsewhere).stdout)
    assert data.is_dir()
