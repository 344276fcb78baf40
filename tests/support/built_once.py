"""Files the whole test run shares, made by the first test process that asks and reused by the others.

`make test` runs the suite on several pytest-xdist workers. A session fixture is per worker, so an input every
worker needs (the stand-in ImageNet weights; the booth's prepared Inception v3 backends: ONNX export, int8 model,
MIGraphX program, about a minute of CPU) would be made once per worker. `built_once` makes it once per run: under
the run's own temp folder (the parent of every worker's basetemp), the first worker builds it under a file lock
while the others wait, then all read it. Readers copy what they change; the shared files are never written again.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.paths import ROOT

DONE = ".built"


def run_root(factory: pytest.TempPathFactory) -> Path:
    """The temp folder of this whole run: the controller's basetemp under xdist, else this session's."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name` of this run, filled by `build(folder)` the first time any worker asks."""
    root = run_root(factory)
    target = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this worker dies
        if not (target / DONE).is_file():
            shutil.rmtree(target, ignore_errors=True)  # a build that died half-way
            target.mkdir()
            build(target)
            (target / DONE).touch()
    return target


# The booth's start-up, as serve.py's warm_booth runs it on a CPU host: the default weights, the fastest backend
# prepared, then each CPU contender prepared and timed (booth.fastest_measured), in a process of its own.
_PREPARE_BOOTH = """
from dlguide_core import booth
from dlguide_core.vision.models import load_model
backend, why = booth.fastest_measured(load_model("imagenet", device="cpu"))
print(why)
"""


def prepare_booth_home(home: Path, torch_home: Path) -> None:
    """Fill `home` (a DLGUIDE_HOME) with what the booth prepares for the stand-in ImageNet weights in `torch_home`:
    its exports/ and compiled/ caches, keyed by the weights' fingerprint as the app keys them."""
    env = {**os.environ, "DLGUIDE_HOME": str(home), "TORCH_HOME": str(torch_home), "DLGUIDE_OFFLINE": "1"}
    for chosen in ("DLGUIDE_KIOSK_BACKEND", "DLGUIDE_KIOSK_ZENTORCH"):  # the default ranking, whatever the shell says
        env.pop(chosen, None)
    done = subprocess.run([sys.executable, "-c", _PREPARE_BOOTH], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"preparing the booth's backends failed:\n{done.stderr[-3000:]}")


def seed_home(prepared: Path, home: Path) -> Path:
    """Copy a prepared DLGUIDE_HOME's caches (exports/, compiled/) into `home`, as a booth restarted on the same
    weights finds them; returns `home`."""
    for cache in ("exports", "compiled"):
        if (prepared / cache).is_dir():
            shutil.copytree(prepared / cache, home / cache, dirs_exist_ok=True)
    return home
