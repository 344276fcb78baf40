"""`--partition`, `--account`, `--time` and their defaults DLGUIDE_SLURM_PARTITION / _ACCOUNT / _TIME reach the
batch script (issue 20), through the CLI's `train --executor slurm`: the flag wins, then the variable, else no
line (Slurm's own default). Only the hand-over to sbatch is replaced here (tests/jobs/executors/test_slurm.py
submits for real); the script sbatch would read is the one the job folder keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.executors import slurm_commands
from dlguide_core.jobs.store import JobStore
from tests.support.toy_data import write_toy_dataset


@pytest.fixture
def submitted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    """`train ... --executor slurm --detach --json` with extra flags -> (the kept sbatch.sh, what sbatch received)."""
    handed: list[tuple[str, dict]] = []

    def sbatch(script_path: str, env) -> str:
        handed.append((script_path, dict(env)))
        return str(1000 + len(handed))

    monkeypatch.setattr(slurm_commands, "missing_tool", lambda: None)
    monkeypatch.setattr(slurm_commands, "partitions", lambda: [])
    monkeypatch.setattr(slurm_commands, "sbatch", sbatch)
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)

    def submit(*flags: str) -> str:
        capsys.readouterr()
        code = main(["train", "--recipe", "cifar_net", "--data", str(data), "--device", "cpu", "--workers", "0",
                     "--executor", "slurm", *flags, "--detach", "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        job = JobStore().get(json.loads(out.out)["job_id"])
        script_path, env = handed[-1]
        assert Path(script_path) == job.job_dir / "sbatch.sh" and job.external_id == str(1000 + len(handed))
        return Path(script_path).read_text()

    return submit


def sbatch_options(script: str) -> dict[str, str]:
    lines = [ln.removeprefix("#SBATCH --") for ln in script.splitlines() if ln.startswith("#SBATCH --")]
    return {key: value for key, _, value in (ln.partition("=") for ln in lines)}  # --requeue: no value


def test_flags_and_their_environment_defaults_reach_the_batch_script(submitted, monkeypatch) -> None:
    for var in ("DLGUIDE_SLURM_PARTITION", "DLGUIDE_SLURM_ACCOUNT", "DLGUIDE_SLURM_TIME"):
        monkeypatch.delenv(var, raising=False)
    plain = sbatch_options(submitted())
    assert not {"partition", "account", "time"} & plain.keys()  # Slurm's defaults: the cluster's partition, ...
    assert plain["signal"] == "B:TERM@60"

    flagged = sbatch_options(submitted("--partition", "gpu", "--account", "project_465000123", "--time", "02:00:00"))
    assert (flagged["partition"], flagged["account"], flagged["time"]) == ("gpu", "project_465000123", "02:00:00")

    monkeypatch.setenv("DLGUIDE_SLURM_PARTITION", "small-g")
    monkeypatch.setenv("DLGUIDE_SLURM_ACCOUNT", "project_1")
    monkeypatch.setenv("DLGUIDE_SLURM_TIME", "00:01:30")
    defaults = sbatch_options(submitted())
    assert (defaults["partition"], defaults["account"], defaults["time"]) == ("small-g", "project_1", "00:01:30")
    assert defaults["signal"] == "B:TERM@45"  # the lead follows the limit from the environment too

    mixed = sbatch_options(submitted("--partition", "standard-g", "--time", "04:00:00"))
    assert (mixed["partition"], mixed["account"], mixed["time"]) == ("standard-g", "project_1", "04:00:00")


def test_a_bad_time_from_the_environment_is_refused_in_one_line(submitted, monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setenv("DLGUIDE_SLURM_TIME", "soon")
    data = write_toy_dataset(tmp_path / "bad", classes=2, per_class=2, val_per_class=1)
    capsys.readouterr()
    assert main(["train", "--recipe", "cifar_net", "--data", str(data), "--executor", "slurm", "--detach"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--time must be a Slurm time limit" in err and "'soon'" in err and err.count("\n") == 0


def test_the_job_runs_from_its_folder_with_the_checkout_on_pythonpath(submitted) -> None:
    """Issue 33: a cancelled job's slurm-N.out appeared in the checkout root, the script's --chdir."""
    from tests.support.paths import ROOT

    script = submitted()
    job = JobStore().list_jobs()[0]
    assert sbatch_options(script)["chdir"] == str(job.job_dir)
    assert f"\nexport PYTHONPATH={ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" in script


def test_requeue_is_asked_by_default_and_the_new_slurm_flags_reach_the_script(submitted) -> None:
    """Issue 32: --requeue unless --no-requeue; --gpus-per-node through gres; --max-requeues and
    --requeue-on-timeout kept for the job's own process (executor.json)."""
    import json

    plain = sbatch_options(submitted())
    assert "requeue" in plain and "no-requeue" not in plain and plain["open-mode"] == "append"
    assert "no-requeue" in sbatch_options(submitted("--no-requeue"))
    gpus = submitted("--gpus-per-node", "2", "--max-requeues", "3", "--requeue-on-timeout")
    assert sbatch_options(gpus)["gpus-per-node"] == "2"
    kept = json.loads((Path(JobStore().list_jobs()[0].job_dir) / "executor.json").read_text())
    assert (kept["max_requeues"], kept["requeue_on_timeout"], kept["gpus_per_node"]) == (3, True, 2)
