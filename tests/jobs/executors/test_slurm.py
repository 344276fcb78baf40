"""Jobs on a real single-node Slurm (tests/support/slurm.py), through the CLI: submit, curves, cancel, the time
limit's checkpointed stop and resume, logs, the batch script; Slurm not answering; flags Slurm refuses.

The four jobs are submitted at once (one module fixture) and run side by side: a loaded 2-core box runs
them in about the time of the slowest.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.executors import slurm_commands, tracking
from dlguide_core.jobs.executors.registry import get_executor
from dlguide_core.jobs.store import JobStore
from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow
# 120,000 steps of a toy run: minutes even on a quiet machine (500 epochs ended inside a 1-minute limit at ~560
# steps/s), so the time limit and the cancel always find it running
LONG = ["--recipe", "cifar_net", "--epochs", "10000", "--batch-size", "1", "--workers", "0", "--device", "cpu"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slurm_home")


@pytest.fixture(autouse=True)
def shared_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DLGUIDE_HOME", str(home))
    return home


def _submit(*argv: str) -> str:
    """`train ... --executor slurm --detach --json` through the CLI's main, in this process (torch is loaded once)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["train", *argv, "--executor", "slurm", "--detach", "--json"])
    assert code == 0, err.getvalue()
    answer = json.loads(out.getvalue())
    assert answer["executor"] == "slurm" and answer["external_id"].isdigit()
    return answer["job_id"]


# DLGUIDE_SLURM_PARTITION / _ACCOUNT / _TIME: the defaults of --partition / --account / --time
SLURM_DEFAULTS = {"DLGUIDE_SLURM_PARTITION": "debug", "DLGUIDE_SLURM_ACCOUNT": "lab_env",
                  "DLGUIDE_SLURM_TIME": "00:30:00"}


def _submit_with_defaults(*argv: str) -> str:
    with pytest.MonkeyPatch.context() as patch:
        for var, value in SLURM_DEFAULTS.items():
            patch.setenv(var, value)
        return _submit(*argv)


def _scontrol(external_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", external_id], capture_output=True, text=True, timeout=30).stdout


@pytest.fixture(scope="module")
def jobs(slurm_cluster, home: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Submitted together, through the CLI: a tiny Inception v3 run, a 2-process torchrun run, a long run to
    cancel, and a long run under --time 00:01:00."""
    data = str(write_toy_dataset(tmp_path_factory.mktemp("toy"), classes=3, per_class=4, val_per_class=1))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DLGUIDE_HOME", str(home))
        submitted = {
            "inception": _submit("--recipe", "inception_v3", "--data", data, "--image-size", "75", "--max-steps", "2",
                                 "--batch-size", "2", "--workers", "0", "--weights", "none", "--device", "cpu",
                                 "--lr", "0.01", "--partition", "debug", "--account", "lab_flag"),
            "ddp": _submit_with_defaults("--recipe", "cifar_net", "--data", data, "--max-steps", "4", "--batch-size",
                                         "2", "--workers", "0", "--device", "cpu", "--nproc-per-node", "2"),
            # 2 DataLoader workers, as people train: dlguide's cancel reaches the main process alone (--batch)
            "cancel": _submit(*LONG[:-4], "--workers", "2", "--device", "cpu", "--data", data),
            "timeout": _submit(*LONG, "--data", data, "--time", "00:01:00"),
        }
        store = JobStore()
        for name in ("inception", "ddp"):  # what Slurm holds for the flags and their defaults, read while it runs
            submitted[f"scontrol {name}"] = _scontrol(store.get(submitted[name], refresh=False).external_id)
        return submitted


def _until_final(store: JobStore, job_id: str, timeout: float = 240) -> str:
    def final():
        tracking.sync(store)
        status = store.get(job_id).status
        return status if status not in ("queued", "running") else None

    return wait_for(final, timeout=timeout, every=0.5, what=lambda: f"job {job_id} to end; log:\n"
                    + _log(store, job_id))


def _log(store: JobStore, job_id: str) -> str:
    path = get_executor("slurm").log_file(store.get(job_id))
    return path.read_text(errors="replace")[-3000:] if path.is_file() else "(no log)"


def _show(capsys, job_id: str) -> dict:
    capsys.readouterr()
    assert main(["jobs", "show", job_id, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cancel_stops_a_running_slurm_job_with_a_checkpoint(jobs, capsys) -> None:
    store, job_id = JobStore(), jobs["cancel"]
    # curves stream while the batch job runs: steps are in the store before it ends
    wait_for(lambda: store.get(job_id).status == "running" and (store.last_step(job_id) or {}).get("step", 0) >= 2,
             timeout=180, what=lambda: "steps of the running job: " + _log(store, job_id))
    assert main(["jobs", "cancel", job_id]) == 0
    capsys.readouterr()
    assert main(["jobs", "logs", job_id, "--follow"]) == 0  # follows the batch output file until the job ends
    followed = capsys.readouterr().out
    assert store.get(job_id).status == "cancelled", store.get(job_id).error
    assert f"job {job_id} cancelled" in followed, followed[-2000:]
    job = store.get(job_id)
    assert job.checkpoint and Path(job.checkpoint).is_file() and job.host and job.boot_id
    assert f"job {job_id} cancelled" in _log(store, job_id) and "killed by signal" not in _log(store, job_id)


def test_time_limit_interrupts_with_a_checkpoint_and_resume_continues(jobs, capsys) -> None:
    store, job_id = JobStore(), jobs["timeout"]
    assert _until_final(store, job_id) == "interrupted", store.get(job_id).error
    first = store.get(job_id)
    assert "SIGTERM" in first.error and first.checkpoint_step and Path(first.checkpoint).is_file()
    script = (first.job_dir / "sbatch.sh").read_text()
    assert "#SBATCH --time=00:01:00" in script and "#SBATCH --signal=B:TERM@30" in script
    capsys.readouterr()
    assert main(["jobs", "resume", job_id, "--detach"]) == 0
    again = store.get(job_id)
    assert again.external_id != first.external_id  # a new batch job
    assert _until_final(store, job_id) == "interrupted"
    steps = store.steps(job_id)["step"]
    assert steps == list(range(1, len(steps) + 1)) and steps[-1] > first.checkpoint_step  # continued, no repeats


def test_inception_v3_job_succeeds_with_its_metrics_log_and_batch_script(jobs, capsys) -> None:
    store, job_id = JobStore(), jobs["inception"]
    assert _until_final(store, job_id) == "succeeded", _log(store, job_id)
    shown = _show(capsys, job_id)
    assert shown["executor"] == "slurm" and shown["external_id"].isdigit() and shown["status"] == "succeeded"
    assert store.steps(job_id)["step"] == [1, 2] and len(shown["epochs"]) == 1
    script = (store.get(job_id).job_dir / "sbatch.sh").read_text()
    for line in ("#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", "--signal=B:TERM@60",
                 f"#SBATCH --output={store.get(job_id).job_dir}/slurm-%j.out", "exec "):
        assert line in script, line
    assert "DLGUIDE_STORE_URL" not in script and "VISIBLE_DEVICES" not in script
    assert "#SBATCH --partition=debug" in script and "#SBATCH --account=lab_flag" in script  # the flags
    assert "Partition=debug" in jobs["scontrol inception"] and "Account=lab_flag" in jobs["scontrol inception"]
    capsys.readouterr()
    assert main(["jobs", "logs", job_id]) == 0
    assert f"job {job_id} succeeded" in capsys.readouterr().out


def test_two_process_torchrun_job_succeeds_with_one_set_of_metrics(jobs, capsys) -> None:
    store, job_id = JobStore(), jobs["ddp"]
    assert _until_final(store, job_id) == "succeeded", _log(store, job_id)
    assert store.steps(job_id)["step"] == [1, 2, 3, 4]  # the writer rank alone reports each step, once
    script = (store.get(job_id).job_dir / "sbatch.sh").read_text()
    assert "#SBATCH --ntasks-per-node=2" in script and "srun" in script and "--rdzv-backend c10d" in script
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST"' in script
    for line in ("#SBATCH --partition=debug", "#SBATCH --account=lab_env", "#SBATCH --time=00:30:00"):
        assert line in script, line  # DLGUIDE_SLURM_PARTITION / _ACCOUNT / _TIME, no flags given
    assert "Account=lab_env" in jobs["scontrol ddp"] and "TimeLimit=00:30:00" in jobs["scontrol ddp"]
    log = get_executor("slurm").log_file(store.get(job_id)).read_text(errors="replace")
    assert "rendezvous on localhost:" in log  # the whole log: its tail may be torchrun's warnings


def test_rendezvous_and_node_rank_flags_are_refused_under_slurm(capsys, tmp_path: Path) -> None:
    data = str(write_toy_dataset(tmp_path / "toy", classes=2, per_class=1, val_per_class=1))
    for flag in (["--rdzv-endpoint", "h:1"], ["--node-rank", "1"]):
        capsys.readouterr()
        assert main(["train", "--recipe", "cifar_net", "--data", data, "--executor", "slurm", *flag]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"{flag[0]} is not used with --executor slurm" in err
    assert main(["train", "--recipe", "cifar_net", "--data", data, "--executor", "slurm", "--time", "soon"]) == 2
    assert JobStore().list_jobs() == [] or all(j.recipe != "cifar_net" or j.status != "queued"
                                               for j in JobStore().list_jobs())


def test_slurm_not_answering_keeps_the_last_known_state(tmp_path: Path, monkeypatch, capsys) -> None:
    """An squeue that hangs: the command times out, the job keeps its status, and the CLI says so."""
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {"epochs": 1}, executor="slurm")
    store.set_external(job.id, "slurm", "999999")
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in slurm_commands.TOOLS:
        (fake / tool).write_text("#!/bin/sh\nsleep 30\n")
        (fake / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    monkeypatch.setattr(slurm_commands, "TIMEOUT_S", 1.0)
    report = tracking.sync(store)
    assert report.not_answering == {"slurm": "Slurm is not answering (squeue took over 1 s)"}
    assert store.get(job.id).status == "queued"
    assert main(["jobs", "list"]) == 0
    assert "Slurm is not answering" in capsys.readouterr().err


def test_sbatch_missing_makes_slurm_unavailable_with_the_reason(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert get_executor("slurm").available() == (False, "`sbatch` is not on PATH")


def test_a_job_whose_store_cannot_be_opened_fails_at_once_with_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "DLGUIDE_STORE_URL": "postgresql://dl:s3cret@127.0.0.1:1/jobs"}
    done = subprocess.run([sys.executable, "-m", "dlguide_core.jobs.executors.job_entry", "someid"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "the job store cannot be opened here" in lines[0] and "DLGUIDE_STORE_URL" in lines[0]
    assert "s3cret" not in done.stderr
