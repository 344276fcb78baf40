"""Who stopped a Slurm job (jobs.executors.slurm_stop), the store's side of a requeue (the same job taken back,
restarts counted, on SQLite and PostgreSQL), a v2 store upgraded to v3, and the flags that reach the batch script
(--requeue by default, --no-requeue, --gpus-per-node, --max-requeues). No Slurm needed: test_slurm_stops.py and
test_slurm_gres.py run the real thing."""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from dlguide_core.jobs import schema
from dlguide_core.jobs.executors import job_entry, slurm_node
from dlguide_core.jobs.executors.slurm_script import BatchPlan, script_text
from dlguide_core.jobs.executors.slurm_stop import judge, stepd_cause
from dlguide_core.jobs.store import JobError, JobStore
from tests.support.paths import ROOT

RUNNING = {"JobState": "RUNNING", "Restarts": "0", "Requeue": "1", "EndTime": "Unknown", "PreemptTime": "None"}
KILLING = {**RUNNING, "JobState": "COMPLETING"}
STEPD = "slurmstepd-n1: error: *** JOB 7 ON n1 CANCELLED AT 2026-11-27T19:56:48{} ***\n"


def _judge(fields: dict, cause: str | None = None, **kw):
    args = {"cancel_flag": False, "step": 12, "restart": 0, "requeue": True, "requeue_on_timeout": False,
            "time_limit": None, "cause": cause, "now": 1_000_000.0, **kw}
    return judge(fields, **args)


def test_the_users_stops_are_cancels_and_the_schedulers_are_requeues_or_interruptions() -> None:
    assert _judge(RUNNING, cancel_flag=True).status == "cancelled"  # dlguide's cancel: the flag, whatever else
    assert _judge(KILLING, "").status == "cancelled"  # a plain scancel: a stepd line without a cause
    assert _judge(RUNNING).status == "cancelled"  # a user's `scancel --signal=TERM`
    preempted = _judge({**KILLING, "Restarts": "1"}, "PREEMPTION")  # as Slurm 22.05 shows a preemption's TERM
    assert (preempted.status, preempted.reason, preempted.requeue_self) == ("queued", "preempted at step 12", False)
    assert _judge({**RUNNING, "PreemptTime": "2026-11-27T19:48:58"}).requeue_self  # grace: TERM to steps only
    assert _judge({**KILLING, "Restarts": "2"}, restart=1).reason == "requeued by Slurm at step 12"
    assert _judge({**KILLING, "Restarts": "1"}, restart=1).status == "cancelled"  # this run's own restart count
    no_requeue = _judge({**KILLING, "Restarts": "1"}, "PREEMPTION", requeue=False)
    assert no_requeue.status == "interrupted" and "--no-requeue" in no_requeue.reason
    assert _judge({**KILLING, "JobState": "NODE_FAIL"}).status == "queued"
    assert _judge({}).status == "interrupted"  # Slurm does not answer: resumable, never failed


def test_a_node_failure_is_told_as_such_though_slurm_counted_its_requeue_first() -> None:
    """As Slurm 22.05 TERMs what is left of a job whose node died: requeued already (Restarts one above), and a
    stepd line whose cause goes on after a comma."""
    line = STEPD.format(" DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS")
    assert stepd_cause(line, "7") == "NODE FAILURE"
    lost = _judge({**KILLING, "Restarts": "1"}, stepd_cause(line, "7"))
    assert (lost.status, lost.reason, lost.requeue_self) == ("queued", "a node failed at step 12", False)
    assert _judge({**KILLING, "Restarts": "1"}, "NODE FAILURE", requeue=False).status == "interrupted"


def test_sruns_own_node_failure_line_is_the_cause_when_stepd_has_not_written_yet() -> None:
    """srun may exit on slurmctld's word before stepd's line and the requeue show (seen under load): the run is
    still RUNNING, unsignalled, Restarts 0, and only srun's line says why. It must not end interrupted."""
    tail = "srun: error: n1: task 0: Exited with exit code 1\nsrun: error: Node failure on n2\n"
    assert stepd_cause(tail, "7") == "NODE FAILURE"
    early = _judge(RUNNING, stepd_cause(tail, "7"), signalled=False)
    assert (early.status, early.reason, early.requeue_self) == ("queued", "a node failed at step 12", False)
    assert stepd_cause(tail + STEPD.format(""), "7") == ""  # stepd's own line, when there, decides
    assert stepd_cause("srun: error: n1: task 0: Exited with exit code 1\n", "7") is None  # a rank alone


def test_processes_that_ended_on_their_own_are_no_cancel() -> None:
    """A rank killed on a node that lives on: Slurm still runs the job, wrote no stepd line and sent no TERM."""
    own = _judge(RUNNING, signalled=False)
    assert own.status == "interrupted" and "resume continues it" in own.reason
    assert _judge(RUNNING).status == "cancelled"  # the same with a TERM: `scancel --signal=TERM`
    assert _judge(KILLING, "", signalled=False).status == "cancelled"  # a plain scancel that beat its TERM here
    assert _judge({**KILLING, "Restarts": "1"}, signalled=False).status == "queued"  # Slurm's requeue still is


RANKS_END = ("import sys; from dlguide_core.jobs.store import JobStore; JobStore().finish(sys.argv[1], 'interrupted', "
             "sys.argv[2]); sys.exit(int(sys.argv[3]))")


@pytest.mark.parametrize(("code", "ending"), [(1, "interrupted"), (0, "cancelled")])
def test_the_job_entry_tells_failed_ranks_from_ranks_stopped_by_a_signal(isolated_home: Path, monkeypatch,
                                                                        code: int, ending: str) -> None:
    """Ranks that fail (exit 1: a peer lost) while Slurm runs on keep their own reason; ranks that stopped
    cleanly (exit 0: TERM to the steps only, `scancel --signal=TERM`) were stopped by the user."""
    import sys

    from dlguide_core.jobs.executors import slurm_commands

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, executor="slurm")
    store.set_external(job.id, "slurm", "41")
    store.claim(job.id, os.getpid())
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.setattr(slurm_commands, "job_fields", lambda external: dict(RUNNING))
    why = "a rank of the run stopped (Connection reset by peer); resume continues it"
    ran = job_entry._run_command(store, job.id, [sys.executable, "-c", RANKS_END, job.id, why, str(code)],
                                 job_entry._EarlySignal())
    assert ran == ("interrupted", code == 0)
    assert job_entry._settle(store, job.id, *ran) == ending
    assert (store.get(job.id, refresh=False).error == why) == (ending == "interrupted")


def test_the_time_limit_interrupts_or_requeues_when_asked() -> None:
    near = {**RUNNING, "EndTime": datetime.fromtimestamp(1_000_030).isoformat(timespec="seconds")}  # 30 s on
    stop = _judge(near, "", time_limit="00:01:00")  # the warning: slurmstepd logs a cause-less line for it too
    assert stop.status == "interrupted" and "SIGTERM before the time limit" in stop.reason
    requeued = _judge(near, time_limit="00:01:00", requeue_on_timeout=True)
    assert (requeued.status, requeued.requeue_self) == ("queued", True)
    far = {**RUNNING, "EndTime": datetime.fromtimestamp(1_003_600).isoformat(timespec="seconds")}
    assert _judge(far, "", time_limit="02:00:00").status == "cancelled"  # a user's `scancel --signal=TERM`
    ended = {**KILLING, "EndTime": datetime.fromtimestamp(1_000_000).isoformat(timespec="seconds")}
    assert _judge(ended, "", time_limit="00:01:00").status == "cancelled"  # a plain scancel: EndTime is now


def test_stepd_lines_name_the_cause_of_this_jobs_last_stop() -> None:
    assert stepd_cause(STEPD.format(" DUE TO PREEMPTION"), "7") == "PREEMPTION"
    assert stepd_cause(STEPD.format(""), "7") == ""
    assert stepd_cause(STEPD.format(" DUE TO JOB REQUEUE") + STEPD.format(""), "7") == ""  # the last one
    assert stepd_cause(STEPD.format(" DUE TO TIME LIMIT"), "8") is None and stepd_cause("", "7") is None


@pytest.mark.usefixtures("store_url")
def test_a_requeued_job_is_taken_back_as_the_same_job_with_its_restarts_counted() -> None:
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, executor="slurm")
    store.set_external(job.id, "slurm", "77")
    store.claim(job.id, os.getpid())
    store.set_checkpoint(job.id, Path("/nowhere/checkpoint.pt"), 30, 0)
    assert store.requeued(job.id, "preempted at step 30")
    queued = store.get(job.id, refresh=False)
    assert (queued.status, queued.external_id, queued.restart_text) == ("queued", "77",
                                                                        "preempted at step 30, requeued")
    with pytest.raises(JobError, match="scheduler job 77"):
        store.take_back(job.id, os.getpid(), "78")  # another Slurm job's run never takes it
    back = store.take_back(job.id, os.getpid(), "77")
    assert (back.status, back.restarts, back.restart_text) == ("running", 1, "preempted at step 30, resumed")
    assert back.to_json()["restarts"] == 1
    # a node lost without a word: the job still "running" is taken back by Slurm's next run of it
    lost = store.take_back(job.id, os.getpid(), "77")
    assert lost.restarts == 2 and lost.restart_note == "stopped without a word (a lost node?) past checkpoint step 30"
    store.request_cancel(job.id)
    assert not store.requeued(job.id, "preempted")  # a cancel wins over a requeue
    with pytest.raises(JobError):
        store.take_back(job.id, os.getpid(), "77")


@pytest.mark.usefixtures("store_url")
def test_a_stop_its_run_could_not_record_is_named_by_the_next_run_and_the_old_run_leaves_it_be(
        tmp_path: Path, monkeypatch) -> None:
    """Seen under load: Slurm requeued a node failure's job and killed the batch script while it still waited on
    srun, so the old run never judged the stop. The next run reads that run's part of the output for the cause;
    and a late old run that does judge never sends the next run's job back to queued."""
    store = JobStore()
    job = store.create("cifar_net", "pytorch", {}, executor="slurm")
    store.set_external(job.id, "slurm", "7")
    store.claim(job.id, 4242)  # the first run's process, on another node
    store.set_checkpoint(job.id, Path("/nowhere/checkpoint.pt"), 6, 0)
    out = tmp_path / "slurm-7.out"
    out.write_text(f"job {job.id} running in process 4242 on n1\nstep 7\nsrun: error: Node failure on n2\n"
                   + STEPD.format(" DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS") + "dlguide: rendezvous\n")
    monkeypatch.setattr(slurm_node, "scontrol_fields", lambda external: {"StdOut": str(out)} if external == "7" else {})
    back = store.take_back(job.id, os.getpid(), "7", slurm_node.unseen_stop(job.id, "7"))
    assert (back.status, back.restarts, back.restart_note) == ("running", 1, "a node failed at step 6")
    assert not store.requeued(job.id, "a node failed at step 6", 4242)  # the old run, too late: not its job now
    assert store.get(job.id, refresh=False).status == "running"
    out.write_text(f"job {job.id} running in process {os.getpid()} on n1\nstep 9\n")  # this run's part: no word
    assert slurm_node.unseen_stop(job.id, "7") is None
    again = store.take_back(job.id, os.getpid(), "7", None)
    assert again.restart_note == "stopped without a word (a lost node?) past checkpoint step 6"
    assert store.requeued(job.id, "preempted at step 6", os.getpid())  # the run that has the job decides


def test_a_v2_store_upgrades_to_v3_with_no_restarts(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DLGUIDE_HOME", str(tmp_path))
    with sqlite3.connect(tmp_path / "jobs.db") as db:  # the store the previous release (v2) wrote
        for statement in (*schema.V1, *schema.V2, schema.VERSION_TABLE):
            db.execute(statement)
        db.execute("INSERT INTO schema_version (version, applied) VALUES (2, 0)")
        db.execute("INSERT INTO jobs (id, recipe, framework, config, status, created, executor, external_id) "
                   "VALUES ('old', 'cifar_net', 'pytorch', '{}', 'interrupted', 1.0, 'slurm', '5')")
    store = JobStore()
    old = store.get("old", refresh=False)
    assert store.schema_version == 3 and (old.restarts, old.restart_note, old.restart_text) == (0, None, None)
    assert (tmp_path / "jobs.db.bak-v2").is_file()


def test_batch_script_asks_for_requeue_by_default_and_gres_gpus(tmp_path: Path) -> None:
    text = script_text(BatchPlan("j1", tmp_path))
    assert "#SBATCH --requeue" in text and "#SBATCH --open-mode=append" in text  # a requeued run appends its log
    assert "#SBATCH --no-requeue" in script_text(BatchPlan("j1", tmp_path, requeue=False))
    gres = script_text(BatchPlan("j1", tmp_path, nproc_per_node=2, gpus=True, gpus_per_node=2))
    assert "#SBATCH --gpus-per-node=2" in gres and "VISIBLE_DEVICES" not in gres  # Slurm's binding, untouched


WORKERS_GET_TERM = """
import os, signal, sys, time
from torch.utils.data import DataLoader
from dlguide_core.training.factories import worker_options
options = worker_options(2) if sys.argv[1] == "ignore" else {"num_workers": 2, "persistent_workers": True}
it = iter(DataLoader(list(range(64)), batch_size=2, **options))
for _ in range(4):  # a batch from each worker (round robin): both have run their worker_init_fn
    next(it)
for worker in it._workers:  # what scancel and preemption do: TERM from outside, to every process
    os.kill(worker.pid, signal.SIGTERM)
time.sleep(1)
print(sum(len(batch) for batch in it))
"""


@pytest.mark.parametrize("init", ["ignore", "none"])
def test_dataloader_workers_survive_a_schedulers_term(init: str) -> None:
    """With worker_options (create_loaders' workers) the loader goes on, and the process still exits with its
    loader alive; without them, the error people saw under Slurm."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WORKERS_GET_TERM, init], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    if init == "ignore":
        assert done.returncode == 0 and done.stdout.strip() == "56", done.stderr[-2000:]
    else:
        assert done.returncode != 0 and "RuntimeError: DataLoader worker (pid" in done.stderr  # killed, or exited


WORKERS_STARTING_GET_TERM = """
import os, signal, sys
from torch.utils.data import DataLoader
from dlguide_core.training.factories import worker_options
options = worker_options(4) if sys.argv[1] == "ignore" else {"num_workers": 4, "persistent_workers": True}
for _ in range(3):  # each try races 4 starting workers
    it = iter(DataLoader(list(range(64)), batch_size=2, **options))
    for worker in it._workers:  # a stop that lands as the workers start: before their worker_init_fn, most of them
        os.kill(worker.pid, signal.SIGTERM)
    print(sum(len(batch) for batch in it))
"""


def test_dataloader_workers_survive_a_term_that_lands_while_they_start() -> None:
    """Forked with TERM blocked until their worker_init_fn ignores it: a stop as the val loader starts at an
    epoch's end no longer kills a worker (the rank then failed without its checkpoint)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WORKERS_STARTING_GET_TERM, "ignore"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.split() == ["64"] * 3, done.stderr[-2000:]
