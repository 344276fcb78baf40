"""The "Run on" choice: an executor whose tools are missing is marked unavailable with the reason and cannot
submit; picking Slurm shows its fields."""

from __future__ import annotations

import os
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.support.ports import free_port


def _script() -> None:
    import streamlit as st

    from ui.executors import run_on

    where = run_on("cifar_net")
    st.write(f"executor={where.executor} problem={where.problem}")


def test_slurm_without_sbatch_is_unavailable_with_the_reason(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm tools
    at = AppTest.from_function(_script, default_timeout=60).run()
    radio = at.radio(key="train_cifar_net_run_on")
    assert radio.options[:2] == ["This machine", "Slurm (unavailable)"] and radio.value == "local"
    radio.set_value("slurm").run()
    assert "Slurm cannot be used here: `sbatch` is not on PATH" in at.warning[0].value
    assert "executor=slurm problem=Slurm: `sbatch` is not on PATH" in at.markdown[-1].value


def test_slurm_fields_when_slurm_is_not_answering(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("sbatch", "squeue", "scontrol", "scancel", "sinfo"):
        (fake / tool).write_text("#!/bin/sh\necho 'sinfo: error: Unable to contact slurm controller' >&2\nexit 1\n")
        (fake / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    at = AppTest.from_function(_script, default_timeout=60).run()
    at.radio(key="train_cifar_net_run_on").set_value("slurm").run()
    assert any("Slurm is not answering" in w.value for w in at.warning)
    assert at.text_input(key="train_cifar_net_slurm_account") is not None
    assert at.number_input(key="train_cifar_net_slurm_nodes").value == 1
    assert "executor=slurm problem=None" in at.markdown[-1].value


def test_ray_without_an_address_or_a_head_is_unavailable_with_the_reason(monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    at = AppTest.from_function(_script, default_timeout=60).run()
    radio = at.radio(key="train_cifar_net_run_on")
    assert radio.options[2] == "Ray (unavailable)"
    radio.set_value("ray").run()
    assert "Ray cannot be used here: no Ray address: pass --ray-address `http://HEAD:8265`" in at.warning[0].value
    assert "`http://HEAD:8265`" in radio.proto.captions[2]  # issue 43: a placeholder, never a link
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("RAY_ADDRESS", dead)
    at = AppTest.from_function(_script, default_timeout=60).run()
    at.radio(key="train_cifar_net_run_on").set_value("ray").run()
    assert f"Ray cannot be used here: Ray is not answering at `{dead}" in at.warning[0].value
    assert "executor=ray problem=Ray: Ray is not answering" in at.markdown[-1].value


def _requeue_script() -> None:
    import streamlit as st

    from ui.executors import run_on

    where = run_on("cifar_net")
    st.write(f"requeue={getattr(where.options, 'requeue', None)}")


def test_slurm_requeue_choice_is_on_by_default_and_reaches_the_options(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("sbatch", "squeue", "scontrol", "scancel", "sinfo"):
        (fake / tool).write_text("#!/bin/sh\necho 'debug*|infinite|(null)|localhost'\n")
        (fake / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    at = AppTest.from_function(_requeue_script, default_timeout=60).run()
    at.radio(key="train_cifar_net_run_on").set_value("slurm").run()
    box = at.checkbox(key="train_cifar_net_slurm_requeue")
    assert box.value is True and "requeue=True" in at.markdown[-1].value  # sbatch --requeue by default
    box.uncheck().run()
    assert "requeue=False" in at.markdown[-1].value


def test_a_requeued_jobs_note_says_it_was_preempted_and_resumed(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DLGUIDE_HOME", str(tmp_path))
    from dlguide_core.jobs.store import JobStore
    from ui.executors import job_note

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, executor="slurm")
    store.set_external(job.id, "slurm", "12")
    store.claim(job.id, os.getpid())
    store.requeued(job.id, "preempted at step 30")
    store.take_back(job.id, os.getpid(), "12")
    assert job_note(store.get(job.id, refresh=False), None) == "preempted at step 30, resumed"
    assert job_note(job, "boom") == "boom"  # a job never requeued: its error alone
