"""N11 (issue 33): the Slurm fields are checked at submit against Slurm's own syntax; a newline or another control
character never reaches the batch script."""

from __future__ import annotations

import pytest

from dlguide_core.cli.main import main
from dlguide_core.jobs.executors.slurm import SlurmExecutor, SlurmOptions
from dlguide_core.jobs.executors.slurm_fields import SlurmFieldError, check_field
from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe
from tests.support.toy_data import write_toy_dataset


@pytest.mark.parametrize("value", [
    "01:30:00", "90", "5:00", "2-12", "2-12:30", "2-12:30:15", "0:30", "9999-23:59:59", "9999999"])
def test_slurms_time_formats_are_taken(value: str) -> None:
    check_field("time", value)


@pytest.mark.parametrize("name, value", [
    ("time", "01:00:00\n#SBATCH --wrap=id"), ("time", "01:00:00\n"), ("time", "1h"), ("time", "0"),
    ("time", "00:00:00"), ("time", " 10"), ("partition", "gpu\n#SBATCH --uid=0"), ("partition", "gpu\r"),
    ("partition", "a b"), ("partition", "$(id)"), ("account", "proj\x1b[31m"), ("account", ""),
    ("account", "x" * 65),
    ("time", "\u0661:00:00"), ("time", "\u0661\u0660"), ("time", "1" * 20), ("time", "9" * 20 + ":00:00"),
    ("time", "12345-00"), ("time", "12345678")])  # issue 43: ASCII digits only, and bounded
def test_anything_else_is_one_line_naming_the_flag(name: str, value: str) -> None:
    with pytest.raises(SlurmFieldError) as err:
        check_field(name, value)
    message = str(err.value)
    assert message.startswith(f"--{name} must be ") and "\n" not in message and "\x1b" not in message


def test_submit_refuses_before_any_job_or_batch_script(tmp_path, monkeypatch, capsys) -> None:
    data = write_toy_dataset(tmp_path / "toy", classes=2, per_class=2, val_per_class=1)
    monkeypatch.setattr("dlguide_core.jobs.executors.slurm.commands.missing_tool", lambda: None)
    code = main(["train", "--recipe", "cifar_net", "--data", str(data), "--executor", "slurm", "--detach",
                 "--account", "proj\n#SBATCH --wrap=id"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: --account must be "), err
    cfg = get_recipe("cifar_net").make_config(data=str(data), epochs=1)
    with pytest.raises(SlurmFieldError, match="--time"):
        SlurmExecutor().submit(JobStore(), "cifar_net", cfg, SlurmOptions(time="1:00\n"))
    monkeypatch.setenv("DLGUIDE_SLURM_PARTITION", "gpu\nx")  # the variables are checked as the flags are
    with pytest.raises(SlurmFieldError, match="--partition"):
        SlurmExecutor().submit(JobStore(), "cifar_net", cfg, SlurmOptions())
    assert JobStore().list_jobs() == []
