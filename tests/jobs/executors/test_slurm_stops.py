"""Every stop from a real Slurm ends right (issue 32), with DataLoader workers as people train: a user's plain
`scancel` ends `cancelled` (never `failed` because a worker got the TERM first), for the
Inception recipe and a TensorFlow recipe; a preemption (partition `high` over `low`, PreemptMode=REQUEUE) sends
the job back to the queue, Slurm runs it again, and the same dlguide job resumes from its checkpoint and
ends `succeeded` at its max steps, each step once, `restarts` counted. A torchrun job (2 processes, 8 DataLoader
workers in all) ends `cancelled` too.

dlguide's own cancel with workers: test_slurm.py's cancel job. The scancel jobs are submitted at once (one module
fixture) and run side by side; the preemption runs last, alone on the node, so that the high job's CPUs can only
come from the low job.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.executors import tracking
from dlguide_core.jobs.executors.registry import get_executor
from dlguide_core.jobs.store import JobStore
from dlguide_core.tf.configs import FASHION_RECIPE
from tests.support import slurm
from tests.support.tf_datagen import write_fashion
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow
# Inception v3 at 75 px on CPU with 2 DataLoader workers: the loader's workers see Slurm's TERM too.
INCEPTION = ["--recipe", "inception_v3", "--image-size", "75", "--batch-size", "2", "--workers", "2", "--weights",
             "none", "--device", "cpu", "--lr", "0.01"]
# The preempted job: a small net with 2 workers, preempted as soon as its process holds the job (before or just
# after its first steps: either way it checkpoints where it stops); enough steps that it is still running then.
PREEMPTED = ["--recipe", "cifar_net", "--epochs", "1000", "--batch-size", "2", "--workers", "2", "--device", "cpu",
             "--partition", "low"]
PREEMPTED_STEPS = 60
# A torchrun job as people run one: 2 processes with 4 DataLoader workers each, 8 workers that all see the TERM.
TORCHRUN = ["--recipe", "cifar_net", "--epochs", "1000", "--batch-size", "2", "--workers", "4", "--nproc-per-node",
            "2", "--device", "cpu"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slurm_stops_home")


@pytest.fixture(autouse=True)
def shared_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DLGUIDE_HOME", str(home))
    return home


def _submit(*argv: str) -> tuple[str, str]:
    """`train ... --executor slurm --detach --json` through the CLI: (dlguide id, Slurm id)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["train", *argv, "--executor", "slurm", "--detach", "--json"])
    assert code == 0, err.getvalue()
    answer = json.loads(out.getvalue())
    return answer["job_id"], answer["external_id"]


def _log(store: JobStore, job_id: str) -> str:
    path = get_executor("slurm").log_file(store.get(job_id, refresh=False))
    return path.read_text(errors="replace")[-4000:] if path.is_file() else "(no log)"


def _running_with_steps(store: JobStore, job_id: str, steps: int = 2, timeout: float = 240) -> None:
    wait_for(lambda: store.get(job_id).status == "running" and (store.last_step(job_id) or {}).get("step", 0) >= steps,
             timeout=timeout, every=0.3, what=lambda: f"steps of job {job_id}; log:\n" + _log(store, job_id))


def _until_final(store: JobStore, job_id: str, timeout: float = 300) -> str:
    def final() -> str | None:
        tracking.sync(store)
        status = store.get(job_id).status
        return status if status not in ("queued", "running") else None

    return wait_for(final, timeout=timeout, every=0.5, what=lambda: f"job {job_id} to end; log:\n"
                    + _log(store, job_id))


@pytest.fixture(scope="module")
def jobs(slurm_cluster, home: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    base = tmp_path_factory.mktemp("stops_data")
    images = str(write_toy_dataset(base / "toy", classes=3, per_class=4, val_per_class=1, size=80))
    fashion = str(write_fashion(base / "fashion", train=512, test=64))
    small = str(write_toy_dataset(base / "toy32", classes=3, per_class=16, val_per_class=1))  # 12 steps an epoch
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DLGUIDE_HOME", str(home))
        return {
            "scancel": _submit(*INCEPTION, "--data", images, "--epochs", "1000"),
            "tf scancel": _submit("--recipe", FASHION_RECIPE, "--data", fashion, "--epochs", "200",
                                  "--batch-size", "16"),
            "torchrun scancel": _submit(*TORCHRUN, "--data", small),
        }


def test_plain_scancel_with_dataloader_workers_ends_cancelled_not_failed(jobs, slurm_cluster) -> None:
    store, (job_id, external) = JobStore(), jobs["scancel"]
    _running_with_steps(store, job_id)
    slurm_cluster.command("scancel", external)  # TERM to every process of the job, the loader's workers too
    assert _until_final(store, job_id) == "cancelled", _log(store, job_id)
    # the store's view of Slurm may say cancelled before the job's main process has recorded its stop checkpoint
    wait_for(lambda: f"job {job_id} cancelled" in _log(store, job_id), timeout=60, what="the job's last line")
    job = store.get(job_id)
    assert "scancel" in (job.error or "") and job.checkpoint and Path(job.checkpoint).is_file()
    assert "killed by signal" not in _log(store, job_id)


def test_plain_scancel_of_a_tensorflow_job_ends_cancelled(jobs, slurm_cluster) -> None:
    store, (job_id, external) = JobStore(), jobs["tf scancel"]
    _running_with_steps(store, job_id, timeout=300)
    slurm_cluster.command("scancel", external)
    assert _until_final(store, job_id) == "cancelled", _log(store, job_id)
    assert "scancel" in (store.get(job_id).error or "")


def _processes_of(job_id: str) -> int:
    """The job's torchrun workers and their DataLoader workers (forked: the same command line) on this host."""
    count = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        count += b"dlguide_core.jobs.worker" in argv and job_id.encode() in argv
    return count


def test_plain_scancel_of_a_torchrun_job_with_eight_loader_workers_ends_cancelled(jobs, slurm_cluster) -> None:
    store, (job_id, external) = JobStore(), jobs["torchrun scancel"]
    _running_with_steps(store, job_id)
    assert _processes_of(job_id) >= 2 + 8  # 2 ranks, each with its 4 training loader workers
    slurm_cluster.command("scancel", external)  # TERM to all: job entry, srun, torchrun, ranks, 8 loader workers
    # The writer rank records its own stop first (interrupted); the job's main process, which got the TERM too,
    # then judges who stopped it: wait for that process, the batch job, to end.
    wait_for(lambda: slurm_cluster.command("squeue", "-h", "-t", "all", "-j", external, "-o", "%T").strip()
             in ("CANCELLED", "COMPLETED", "FAILED"), timeout=300, every=0.5,
             what=lambda: f"Slurm job {external} to end; log:\n" + _log(store, job_id))
    # Slurm says CANCELLED (and the store's view of Slurm follows) while the job's processes may still be ending:
    # the record is whole once the job's main process has judged it and said its last line
    wait_for(lambda: f"job {job_id} cancelled" in _log(store, job_id), timeout=60, what="the job's last line")
    job = store.get(job_id)
    assert job.status == "cancelled", _log(store, job_id)
    assert "scancel" in (job.error or "") and job.checkpoint and Path(job.checkpoint).is_file()
    log = get_executor("slurm").log_file(job).read_text(errors="replace")
    assert "killed by signal" not in log and "StoreError" not in log, log[-4000:]
    assert f"job {job_id} interrupted: stopped by SIGTERM at step" in log  # the writer rank's own ending, then judged


def test_preempted_job_is_requeued_and_the_same_job_resumes_to_succeeded(jobs, slurm_cluster, home: Path,
                                                                         capsys) -> None:
    """Last in the module: the node holds only this job, so the high job's CPUs must come from it."""
    data = str(write_toy_dataset(home / "toy_preempt", classes=3, per_class=8, val_per_class=1))
    store = JobStore()
    job_id, external = _submit(*PREEMPTED, "--data", data, "--max-steps", str(PREEMPTED_STEPS))
    wait_for(lambda: store.get(job_id).status == "running", timeout=240, every=0.2,
             what=lambda: f"job {job_id} to start; log:\n" + _log(store, job_id))
    high = slurm_cluster.command("sbatch", "--parsable", "-p", "high", "-c", str(slurm.NODE_CPUS), "-o", "/dev/null",
                                 "--wrap", "sleep 1").strip()
    wait_for(lambda: store.get(job_id).restarts >= 1 or None, timeout=180, every=0.3,
             what=lambda: "the preempted job to come back; log:\n" + _log(store, job_id))
    assert _until_final(store, job_id) == "succeeded", _log(store, job_id)
    job = store.get(job_id)
    assert job.external_id == external and job.restarts >= 1 and job.restart_note.startswith("preempted at step")
    assert job.restart_text.endswith(", resumed")
    assert store.steps(job_id)["step"] == list(range(1, PREEMPTED_STEPS + 1))  # each step once, none lost
    capsys.readouterr()
    assert main(["jobs", "show", job_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["restarts"] == job.restarts and shown["status"] == "succeeded"
    log = _log(store, job_id)
    assert "DUE TO PREEMPTION" in log and "Slurm's restart 1" in log and "killed by signal" not in log
    assert "Partition=high" in slurm_cluster.command("scontrol", "show", "job", high)
