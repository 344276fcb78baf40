"""The Slurm executor: a job becomes a batch job (jobs.executors.slurm_script), watched with squeue/scontrol.

Submit writes `sbatch.sh` into the job folder and runs sbatch with the submitter's environment (DLGUIDE_HOME,
DLGUIDE_STORE_URL: never argv), minus this machine's GPU binding. The job's process (jobs.executors.job_entry)
claims the job and records its own result; Slurm's state is read only for what the job cannot say (STATES).
Cancel: `scancel` for a pending job, else the store's cancel flag and `scancel --signal=TERM --batch`: TERM to the
job's main process alone (its helpers never see it), the same checkpointed stop as a local job. Any other stop
(a plain scancel, preemption, the time limit, a node failure) is judged in jobs.executors.slurm_stop. A job Slurm
requeues comes back as the same dlguide job (`--requeue`, the default). Resume: a new batch job from the last
checkpoint.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dlguide_core import settings
from dlguide_core.errors import DistributedError
from dlguide_core.jobs.executors import slurm_commands as commands
from dlguide_core.jobs.executors.base import Availability, Executor, ExternalStatus
from dlguide_core.jobs.executors.slurm_fields import check_options
from dlguide_core.jobs.executors.slurm_script import BatchPlan, output_file, write_script
from dlguide_core.jobs.executors.slurm_stop import MAX_REQUEUES
from dlguide_core.jobs.store import Job, JobStore, job_dir
from dlguide_core.training.configs import RDZV_BY_SCHEDULER, ConfigError

if TYPE_CHECKING:
    from dlguide_core.training.recipes import Recipe, RecipeConfig

# Slurm JobState -> dlguide status (the table); states not listed: no opinion.
STATES = {
    **dict.fromkeys(("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED"), "queued"),
    **dict.fromkeys(("RUNNING", "CONFIGURING", "COMPLETING", "STAGE_OUT", "SIGNALING"), "running"),
    "COMPLETED": "succeeded",
    "CANCELLED": "cancelled",
    **dict.fromkeys(("TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE"), "interrupted"),
    **dict.fromkeys(("FAILED", "OUT_OF_MEMORY"), "failed"),
}
PENDING_REASONS = {  # Slurm's Reason codes in words (others are shown as Slurm spells them)
    "Resources": "waiting for resources", "Priority": "waiting behind jobs of higher priority",
    "Dependency": "waiting for a job it depends on", "BeginTime": "waiting for its start time",
    "PartitionConfig": "asks for more than the partition has", "ReqNodeNotAvail": "the nodes it needs are down",
    "JobHeldUser": "held by its user", "JobHeldAdmin": "held by an administrator", "None": "waiting to be scheduled",
    "QOSMaxJobsPerUserLimit": "the QOS limit of jobs per user is reached",
    "AssocGrpGRES": "the account's GPU limit is reached",
    "PartitionTimeLimit": "its time limit exceeds the partition's",
}
TIME_FORMAT = "HH:MM:SS"


@dataclass(frozen=True)
class SlurmOptions:
    """--partition, --account, --time; unset: DLGUIDE_SLURM_PARTITION / _ACCOUNT / _TIME, else Slurm's defaults.
    --requeue (default) / --no-requeue, --requeue-on-timeout, --max-requeues: what a stop by Slurm does
    (jobs.executors.slurm_stop); --gpus-per-node: GPUs through Slurm's gres (else nproc_per_node on a GPU
    partition)."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    requeue: bool = True
    requeue_on_timeout: bool = False
    max_requeues: int = MAX_REQUEUES
    gpus_per_node: int | None = None

    def resolved(self) -> SlurmOptions:
        env = os.environ
        return replace(self, partition=self.partition or env.get("DLGUIDE_SLURM_PARTITION") or None,
                       account=self.account or env.get("DLGUIDE_SLURM_ACCOUNT") or None,
                       time=self.time or env.get("DLGUIDE_SLURM_TIME") or None)


def check_counts(options: SlurmOptions) -> None:
    if options.max_requeues < 0:
        raise ConfigError(f"--max-requeues must be 0 or more, not {options.max_requeues}")
    if options.gpus_per_node is not None and options.gpus_per_node < 0:
        raise ConfigError(f"--gpus-per-node must be 0 or more, not {options.gpus_per_node}")


def describe_reason(reason: str) -> str:
    return PENDING_REASONS.get(reason, reason)


class SlurmExecutor(Executor[SlurmOptions]):
    name = "slurm"
    options_cls = SlurmOptions
    refused_flags = {"rdzv_endpoint": "Slurm's job rendezvouses on its first node",
                     "node_rank": "Slurm starts every node of the job itself"}

    def available(self) -> Availability:
        tool = commands.missing_tool()
        return Availability(False, f"`{tool}` is not on PATH") if tool else Availability(True, None)

    def check(self, recipe: Recipe, config: RecipeConfig, options: SlurmOptions) -> SlurmOptions:
        if getattr(config, "rdzv_endpoint", "") not in ("", RDZV_BY_SCHEDULER):
            raise DistributedError(f"--rdzv-endpoint is not used with Slurm: {self.refused_flags['rdzv_endpoint']}")
        options = options.resolved()
        check_options(options)  # partition, account, time: Slurm's syntax, no newline (slurm_fields)
        check_counts(options)
        return options

    def hand_over(self, store: JobStore, job: Job, options: SlurmOptions) -> Job:
        plan = self.plan(job, options)
        try:
            script = write_script(plan)
            external_id = commands.sbatch(str(script), self.submit_env())
        except Exception as exc:
            store.finish(job.id, "failed", f"could not submit to Slurm: {exc}")
            raise
        store.set_external(job.id, self.name, external_id)
        return store.get(job.id, refresh=False)

    def plan(self, job: Job, options: SlurmOptions) -> BatchPlan:
        launch = job.launch
        gpus = bool(options.gpus_per_node) or (options.gpus_per_node is None and (launch.device == "cuda" or (
            launch.device == "auto" and self._partition_has_gpus(options.partition))))
        return BatchPlan(job.id, job_dir(job.id), nnodes=launch.nnodes, nproc_per_node=launch.nproc_per_node,
                         gpus=gpus, partition=options.partition, account=options.account, time=options.time,
                         max_restarts=launch.max_restarts, requeue=options.requeue,
                         gpus_per_node=options.gpus_per_node or None)

    @staticmethod
    def _partition_has_gpus(name: str | None) -> bool:
        parts = commands.partitions()
        chosen = next((p for p in parts if p.name == name or (name is None and p.default)), None)
        return bool(chosen and chosen.has_gpus)

    @staticmethod
    def submit_env() -> dict[str, str]:
        env = commands.clean_env(os.environ)
        env["DLGUIDE_HOME"] = str(settings.home().resolve())  # a relative home means nothing on a node
        return env

    def submit_warnings(self, options: SlurmOptions | None = None) -> tuple[str, ...]:
        """One line when the job's nodes cannot reach the store: SQLite in DLGUIDE_HOME on this machine."""
        if (os.environ.get("DLGUIDE_STORE_URL") or "sqlite").startswith("sqlite"):
            options = (options or SlurmOptions()).resolved()
            try:
                parts = commands.partitions()
            except Exception:  # noqa: BLE001 - the submit itself says what is wrong with Slurm
                return ()
            chosen = next((p for p in parts if p.name == options.partition or
                           (options.partition is None and p.default)), None)
            others = [n for n in commands.hostnames(chosen.nodes) if n not in _this_host()] if chosen else []
            if others:
                return (f"the job store is SQLite on this machine, so a job on {', '.join(others[:3])} cannot report "
                        "its metrics: set DLGUIDE_STORE_URL=postgresql://... for a store every node reaches "
                        "(docs/CLUSTERS.md)",)
        return ()

    def status(self, job: Job) -> ExternalStatus:
        external = getattr(job, "external_id", None)
        if not external:
            return ExternalStatus(None, "not submitted to Slurm", "")
        found = commands.job_state(external)
        if found is None:
            return ExternalStatus(None, f"Slurm no longer knows job {external}", "")
        state = found.state.split()[0].rstrip("+")
        status = STATES.get(state)
        if status == "queued":
            return ExternalStatus(status, f"Slurm: {describe_reason(found.reason)}", state)
        if status in ("failed", "interrupted"):
            return ExternalStatus(status, self._ending_reason(job, external, state, found.reason), state)
        return ExternalStatus(status, None, state)

    def _ending_reason(self, job: Job, external: str, state: str, reason: str) -> str:
        words = {"TIMEOUT": "the time limit ended it", "NODE_FAIL": "a node failed", "PREEMPTED": "it was preempted",
                 "OUT_OF_MEMORY": "it ran out of memory"}.get(state, reason if reason not in ("", "None") else state)
        last = _last_line(self._log_file(job.id, external))
        return f"Slurm job {external} {state}: {words}" + (f"; last log line: {last}" if last else "")

    def cancel(self, store: JobStore, job: Job) -> Job:
        external = getattr(job, "external_id", None)
        if job.status == "queued":
            job = store.request_cancel(job.id)
            if external:
                commands.scancel(external)
            return job
        job = store.request_cancel(job.id)  # the flag first: the TERM then ends it as cancelled
        if external:  # the batch step only: the job's main process decides, its helpers never see the TERM
            commands.scancel(external, signal="TERM", batch_only=True)
        return job

    def log_file(self, job: Job) -> Path:
        return self._log_file(job.id, getattr(job, "external_id", None) or "")

    @staticmethod
    def _log_file(job_id: str, external: str) -> Path:
        return Path(str(output_file(job_dir(job_id))).replace("%j", external))


def _this_host() -> set[str]:
    name = socket.gethostname()
    return {name, name.split(".")[0], "localhost", socket.getfqdn()}


def _last_line(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 4096))
            lines = [ln.strip() for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return None
    return lines[-1][:200] if lines else None
