"""The Train page's "Run on" choice (This machine / Slurm / Ray) and what a job on a scheduler shows.

`run_on(name)` draws the choice (an executor that cannot be used here is marked unavailable with the reason and
cannot submit) and the Slurm fields (partition from sinfo, account, time limit, nodes, GPUs or processes per
node); it returns a typed `RunOn`. `submit`, `cancel` and `resume` go through the job's executor. `job_note`,
`scheduler_banner` and `job_files` show a queued job's pending reason, "Slurm is not answering", and the batch
script and log of a job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import streamlit as st

from dlguide_core.errors import DlguideError
from dlguide_core.jobs import queue
from dlguide_core.jobs.executors import registry, tracking
from dlguide_core.jobs.executors.base import NoOptions, options_from
from dlguide_core.jobs.store import ACTIVE, Job, JobStore
from dlguide_core.training.configs import RDZV_BY_SCHEDULER
from ui.literal_text import unlinked

if TYPE_CHECKING:
    from dlguide_core.jobs.executors.base import ExecutorOptions
    from dlguide_core.training.recipes import RecipeConfig

PARTITIONS_TTL_S = 30.0  # sinfo is asked at most this often per session
LOG_TAIL_LINES = 200


@dataclass(frozen=True)
class RunOn:
    """Where a new job runs: the executor, its options, the config values it sets (nodes, processes per node),
    and why it cannot be used (None when it can)."""

    executor: str = registry.DEFAULT
    options: ExecutorOptions = field(default_factory=NoOptions)  # the executor's options_cls
    config_values: dict[str, int | str] = field(default_factory=dict)  # nnodes, nproc_per_node, rdzv_endpoint
    problem: str | None = None
    warnings: tuple[str, ...] = ()


def run_on(name: str) -> RunOn:
    """The "Run on" radio and, for a scheduler, its fields; keys carry the recipe's name like the form's."""
    choices = {c.name: c for c in registry.choices()}
    picked = st.radio("Run on", list(choices), horizontal=True, key=f"train_{name}_run_on",
                      format_func=lambda n: choices[n].label + ("" if choices[n].ok else " (unavailable)"),
                      captions=[unlinked(c.reason or "") for c in choices.values()])  # `http://HEAD:8265`: no link
    choice = choices[picked]
    if not choice.ok:
        st.warning(f"{choice.label} cannot be used here: {unlinked(choice.reason or '')}", icon=":material/block:")
        return RunOn(picked, problem=f"{choice.label}: {choice.reason}")
    if picked == "slurm":
        return _slurm_fields(name)
    if picked != registry.DEFAULT:
        return RunOn(picked, options_from(registry.get_executor(picked).options_cls, {}))
    return RunOn()


def _partitions() -> tuple[list[Any], str | None]:
    """(partitions, None) from sinfo, at most every PARTITIONS_TTL_S; ([], why) when Slurm does not answer."""
    from dlguide_core.jobs.executors import slurm_commands

    cached = st.session_state.get("train_slurm_partitions")
    if cached and time.monotonic() - cached[2] < PARTITIONS_TTL_S:
        return cached[0], cached[1]
    try:
        found, problem = slurm_commands.partitions(), None
    except DlguideError as exc:
        found, problem = [], str(exc)
    st.session_state["train_slurm_partitions"] = (found, problem, time.monotonic())
    return found, problem


def _slurm_fields(name: str) -> RunOn:
    import os

    parts, problem = _partitions()
    c1, c2, c3 = st.columns(3)
    if parts:
        names = [p.name for p in parts]
        preferred = os.environ.get("DLGUIDE_SLURM_PARTITION") or next((p.name for p in parts if p.default), names[0])
        limits = {p.name: p.time_limit for p in parts}
        partition = c1.selectbox("Partition", names, index=names.index(preferred) if preferred in names else 0,
                                 key=f"train_{name}_slurm_partition", format_func=lambda n: f"{n} (limit {limits[n]})")
    else:
        st.warning(problem or "sinfo lists no partition", icon=":material/cloud_off:")
        partition = c1.text_input("Partition", os.environ.get("DLGUIDE_SLURM_PARTITION", ""),
                                  key=f"train_{name}_slurm_partition_text") or None
    account = c2.text_input("Account", os.environ.get("DLGUIDE_SLURM_ACCOUNT", ""),
                            key=f"train_{name}_slurm_account") or None
    limit = c3.text_input("Time limit (HH:MM:SS)", os.environ.get("DLGUIDE_SLURM_TIME", ""),
                          placeholder="the partition's", key=f"train_{name}_slurm_time") or None
    gpus = any(p.has_gpus for p in parts if p.name == partition)
    nodes = c1.number_input("Nodes", 1, 4096, 1, key=f"train_{name}_slurm_nodes")
    per_node = c2.number_input("GPUs per node" if gpus else "Processes per node (CPU tasks)", 1, 64, 1,
                               key=f"train_{name}_slurm_per_node")
    requeue = c3.checkbox("Requeue when preempted", True, key=f"train_{name}_slurm_requeue",
                          help="Slurm may stop the job (preemption, a lost node) and run it again: it resumes from "
                          "its checkpoint as the same job (sbatch --requeue). Off: it ends interrupted.")
    executor = registry.get_executor("slurm")
    options = options_from(executor.options_cls, {"partition": partition, "account": account, "time": limit,
                                                  "requeue": requeue})
    values: dict[str, int | str] = {"nnodes": int(nodes), "nproc_per_node": int(per_node),
              "rdzv_endpoint": RDZV_BY_SCHEDULER if nodes > 1 else ""}
    warnings = executor.submit_warnings(options)
    for warning in warnings:
        st.warning(warning, icon=":material/database:")
    return RunOn("slurm", options, values, None, warnings)


def submit(store: JobStore, recipe: str, config: RecipeConfig, where: RunOn, owner: str | None = None) -> Job:
    """Queue here (the local queue) or hand the job to the chosen scheduler, as `owner` (None: the OS user)."""
    if where.problem:
        raise DlguideError(where.problem)
    if where.executor == registry.DEFAULT:
        return queue.submit(store, recipe, config, start=False, owner=owner)  # ui.jobs launches it in the background
    return registry.get_executor(where.executor).submit(store, recipe, config, where.options, owner=owner)


def cancel(store: JobStore, job: Job) -> Job:
    return registry.get_executor(tracking.executor_of(job)).cancel(store, job)


def resume(store: JobStore, job: Job) -> Job:
    name = tracking.executor_of(job)
    if name == registry.DEFAULT:
        return queue.resume(store, job.id, start=False)  # ui.jobs launches it in the background
    return registry.get_executor(name).resume(store, job.id)


def where(job: Job) -> str:
    """"this machine", or "slurm 1234"."""
    name = tracking.executor_of(job)
    return "this machine" if name == registry.DEFAULT else f"{name} {job.external_id or ''}".strip()


def job_note(job: Job, error: str | None) -> str:
    """The table's note: the error, or a scheduler job's pending reason while it waits; after a requeue, what
    stopped it first ("preempted at step 30, resumed")."""
    note = error or ""
    if job.status in ACTIVE and tracking.executor_of(job) != registry.DEFAULT:
        last = tracking.last_known(job.id)
        if last and last.reason and job.status == "queued":
            note = last.reason
    return "; ".join(part for part in (job.restart_text, note) if part)


def scheduler_banner(report: tracking.SyncReport) -> None:
    """"Slurm is not answering": the jobs below keep their last known state."""
    for message in report.not_answering.values():
        st.warning(f"{message}: its jobs show their last known state.", icon=":material/cloud_off:")


def job_files(job: Job) -> None:
    """The job's log (its tail) and, for a Slurm job, its batch script, in a popover one click away."""
    if tracking.executor_of(job) == registry.DEFAULT:
        return  # this machine's job: the Log tab has it all
    executor = registry.get_executor(tracking.executor_of(job))
    with st.popover("Log and batch script", icon=":material/description:"):
        script = job.job_dir / "sbatch.sh"
        if script.is_file():
            st.caption(f"Batch script {script}")
            st.code(script.read_text(errors="replace"), language="bash")
        path = executor.log_file(job)
        st.caption(f"Log {path}")
        lines = path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:] if path.is_file() else []
        st.code("\n".join(lines) or "(no output yet)", language="text")
