"""GPUs through Slurm's gres with no GPU (issue 32): a cluster of its own whose node declares two GPUs on device
files the test makes (gres.conf, AutoDetect=off, Flags=amd_gpu_env), so the assignment is Slurm's. `--gpus-per-node
N` reaches sbatch; the binding Slurm sets (ROCR_VISIBLE_DEVICES here) reaches the job unchanged and its log names
it; a job waits for GPUs another job holds. Without `Flags=amd_gpu_env` (a cluster of its own again) Slurm binds
with CUDA_VISIBLE_DEVICES, and the job sees that, not the submitter's own."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.executors import tracking
from dlguide_core.jobs.executors.registry import get_executor
from dlguide_core.jobs.store import JobStore
from tests.support import slurm
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow
RUN = ["--recipe", "cifar_net", "--batch-size", "1", "--workers", "0", "--device", "cpu"]


@pytest.fixture(scope="module")
def gpu_cluster(slurm_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[slurm.SlurmCluster]:
    """Its own cluster (the session's has no GPUs, so its jobs never wait for one); SLURM_CONF points at it."""
    with slurm.serving(tmp_path_factory.mktemp("slurm_gres"), gpus=True) as cluster:
        yield cluster


@pytest.fixture
def cuda_cluster(gpu_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[slurm.SlurmCluster]:
    """The same node's gres without Flags: Slurm's default binding variables."""
    with slurm.serving(tmp_path_factory.mktemp("slurm_gres_cuda"), gpus=True, gpu_flags=None) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def home(gpu_cluster, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path_factory.getbasetemp() / "slurm_gres_home"
    monkeypatch.setenv("DLGUIDE_HOME", str(path))
    return path


def _submit(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["train", *RUN, *argv, "--executor", "slurm", "--detach", "--json"])
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())["job_id"]


def _log(store: JobStore, job_id: str) -> str:
    path = get_executor("slurm").log_file(store.get(job_id, refresh=False))
    return path.read_text(errors="replace") if path.is_file() else ""


def _until_final(store: JobStore, job_id: str) -> str:
    def final() -> str | None:
        tracking.sync(store)
        status = store.get(job_id).status
        return status if status not in ("queued", "running") else None

    return wait_for(final, timeout=300, every=0.5, what=lambda: f"job {job_id} to end; log:\n" + _log(store, job_id))


def test_gres_gpus_reach_the_job_as_slurm_bound_them_and_a_job_waits_for_held_gpus(tmp_path: Path) -> None:
    data = str(write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1))
    store = JobStore()
    both = _submit("--data", data, "--epochs", "10000", "--gpus-per-node", "2")  # holds both GPUs until cancelled
    wait_for(lambda: store.get(both).status == "running" and "devices from the scheduler" in _log(store, both),
             timeout=240, what=lambda: "the 2-GPU job to start; log:\n" + _log(store, both))
    one = _submit("--data", data, "--max-steps", "2", "--gpus-per-node", "1")
    assert "#SBATCH --gpus-per-node=1" in (store.get(one).job_dir / "sbatch.sh").read_text()
    def waiting() -> object:
        answer = tracking.sync(store).statuses.get(one)
        return answer if answer and "resources" in (answer.reason or "") else None

    pending = wait_for(waiting, timeout=90, what="the 1-GPU job to wait for the GPUs the first one holds")
    assert store.get(one).status == "queued" and pending.reason == "Slurm: waiting for resources", pending
    assert "devices from the scheduler: ROCR_VISIBLE_DEVICES=0,1" in _log(store, both)  # Slurm's, unchanged
    assert main(["jobs", "cancel", both]) == 0
    assert _until_final(store, both) == "cancelled"
    assert _until_final(store, one) == "succeeded", _log(store, one)
    assert re.search(r"devices from the scheduler: ROCR_VISIBLE_DEVICES=[01]\n", _log(store, one)), _log(store, one)


def test_without_amd_gpu_env_the_job_sees_cuda_visible_devices_as_slurm_bound_them(cuda_cluster, tmp_path: Path,
                                                                                    monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")  # the submitting machine's own binding: never the job's
    data = str(write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1))
    store = JobStore()
    job_id = _submit("--data", data, "--max-steps", "1", "--gpus-per-node", "1")
    assert _until_final(store, job_id) == "succeeded", _log(store, job_id)
    bound = re.search(r"devices from the scheduler: (.*)\n", _log(store, job_id))
    # 22.05 set CUDA_VISIBLE_DEVICES=0 ROCR_VISIBLE_DEVICES=0 GPU_DEVICE_ORDINAL=0 here
    assert bound and "CUDA_VISIBLE_DEVICES=0" in bound[1].split(), _log(store, job_id)
    assert "=7" not in bound[1], bound[1]
