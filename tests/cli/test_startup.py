"""The CLI answers its light commands without importing torch, TensorFlow or onnxruntime (issue 10).

`--help` and `jobs list/show/cancel/export` are what scripts poll; importing torch made each call take
~10 s and 830 MB on a loaded machine. Each command runs in a fresh child process, as a user's would,
and reports which heavy modules it loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from dlguide_core.cli import bench as cli_bench
from dlguide_core.cli import export as cli_export
from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe
from tests.support.paths import ROOT
from tests.support.waiting import wait_until_done

HEAVY = ("torch", "torchvision", "tensorflow", "keras", "onnxruntime", "onnx", "migraphx")
PROBE = """
import runpy, sys, json
sys.argv = ["dlguide_core", *json.loads(sys.argv[1])]
try:
    runpy.run_module("dlguide_core", run_name="__main__")
finally:
    print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)), file=sys.stderr)
"""


def _loaded_by(*argv: str) -> tuple[int, list[str]]:
    """(exit code, heavy modules imported) of `python -m dlguide_core ARGV` in a fresh process."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), json.dumps(argv)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "DLGUIDE_MAX_JOBS": ""})
    return done.returncode, json.loads(done.stderr.strip().splitlines()[-1])


def _jobs() -> tuple[str, str]:
    """A running job (alive: this test process) with metrics, and a queued-then-cancellable one."""
    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=1)
    running = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.claim(running.id, os.getpid())
    store.set_plan(running.id, 10, 1, ("a", "b"))
    store.add_steps([(running.id, s, 0, 2.0 / s, 0.001, 40.0, time.time() + s, None) for s in range(1, 6)])
    store.add_epoch(running.id, 0, {"train_loss": 0.9, "val_loss": 0.8, "top1": 55.0, "top5": 100.0})
    other = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.close()
    return running.id, other.id


@pytest.mark.parametrize("argv", [("--help",), ("jobs", "--help"), ("jobs", "list", "--json"), ("jobs", "list")])
def test_help_and_listing_do_not_import_heavy_libraries(argv: tuple[str, ...]) -> None:
    _jobs()
    code, heavy = _loaded_by(*argv)
    assert code == 0 and heavy == []


def test_jobs_show_cancel_export_do_not_import_heavy_libraries() -> None:
    running, queued = _jobs()
    for argv in (("jobs", "show", running, "--json"), ("jobs", "show", running), ("jobs", "export", running, "--csv"),
                 ("jobs", "cancel", queued), ("jobs", "cancel", running), ("jobs", "show", "nope", "--json")):
        code, heavy = _loaded_by(*argv)
        assert code == (1 if "nope" in argv else 0) and heavy == [], argv
    assert JobStore().get(queued).status == "cancelled"


def test_the_parsers_choices_match_the_core() -> None:
    """bench reads its choices from the torch-free backend names (issue 23), export keeps its own beside the
    parser (the core module imports torch): every name bench offers is a backend the registry can prepare."""
    from dlguide_core.inference import export, registry

    assert [cls.name for cls in registry.backend_classes()] == list(cli_bench.BACKENDS)
    assert cli_export.EXPORTERS == export.EXPORTERS


@pytest.mark.parametrize("processes", [1, 2])
def test_jobs_list_launches_a_queued_job_without_importing_heavy_libraries(processes: int) -> None:
    """With nothing running, `jobs list` starts the queue's next job (one process, or torchrun over N):
    the listing process builds the command line without torch; the job itself imports what it needs."""
    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=1, nproc_per_node=processes)
    queued = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    code, heavy = _loaded_by("jobs", "list", "--json")
    assert code == 0 and heavy == []
    job = wait_until_done(store, queued.id, timeout=240)
    assert job.status == "failed" and job.pid is not None, job  # launched, then failed on the missing folder
    store.close()
