"""Slurm's command-line tools, each call bounded by a timeout: sbatch, squeue, scontrol, sacct, scancel, sinfo.

A command that times out or cannot reach the controller raises SchedulerNotAnswering ("Slurm is not
answering"); a tool that is not installed raises ExecutorUnavailable. Nothing here knows dlguide's jobs: the
executor (jobs.executors.slurm) maps what these return.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from dlguide_core.errors import DlguideError, first_line
from dlguide_core.jobs.executors.base import ExecutorUnavailable, SchedulerNotAnswering

TIMEOUT_S = 10.0  # every Slurm command; a controller that takes longer is "not answering"
TOOLS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
# What a controller that is down or unreachable makes the tools print.
DOWN_MARKERS = ("Unable to contact slurm controller", "Socket timed out", "Connection refused",
                "Zero Bytes were transmitted", "slurm_load_jobs error", "Communication connection failure")


class SlurmError(DlguideError):
    """A Slurm command that answered with an error (the message is Slurm's own first line)."""


@dataclass(frozen=True)
class SlurmJobState:
    """One job as Slurm reports it: JobState, Reason, and the nodes it runs on."""

    state: str
    reason: str
    nodes: str = ""
    exit_code: str = ""


def missing_tool() -> str | None:
    """The first Slurm tool not on PATH, or None."""
    return next((tool for tool in TOOLS if shutil.which(tool) is None), None)


def run(argv: list[str], *, timeout: float | None = None, env: Mapping[str, str] | None = None,
        stdin: str | None = None) -> str:
    """stdout of a Slurm command; SchedulerNotAnswering on a timeout (TIMEOUT_S) or an unreachable controller."""
    timeout = TIMEOUT_S if timeout is None else timeout
    if shutil.which(argv[0]) is None:
        raise ExecutorUnavailable(f"`{argv[0]}` is not on PATH")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=stdin,
                              env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired as exc:
        raise SchedulerNotAnswering(f"Slurm is not answering ({argv[0]} took over {timeout:.0f} s)") from exc
    if done.returncode != 0:
        message = first_line(done.stderr) or first_line(done.stdout) or f"exit code {done.returncode}"
        if any(marker in done.stderr for marker in DOWN_MARKERS):
            raise SchedulerNotAnswering(f"Slurm is not answering ({message})")
        raise SlurmError(f"{argv[0]}: {message}")
    return done.stdout


def sbatch(script_path: str, env: Mapping[str, str]) -> str:
    """Submit a batch script; returns Slurm's job id."""
    out = run(["sbatch", "--parsable", script_path], env=env).strip()
    return out.split(";")[0]  # "ID" or "ID;cluster"


def job_state(job_id: str) -> SlurmJobState | None:
    """The job's state from squeue (finished jobs too, while the controller keeps them), else scontrol, else
    sacct where accounting works; None when Slurm no longer knows the job."""
    try:
        data = json.loads(run(["squeue", "--json", "-t", "all", "-j", job_id]))
        for job in data.get("jobs", []):
            if str(job.get("job_id")) == job_id:
                return SlurmJobState(str(job.get("job_state", "")), str(job.get("state_reason", "") or ""),
                                     str(job.get("nodes", "") or ""), str(job.get("exit_code", "")))
    except SlurmError:
        pass  # an id squeue has forgotten is an error for it ("Invalid job id specified")
    except ValueError:
        pass  # an squeue without --json (before 21.08): scontrol below says the same
    return _scontrol_state(job_id) or _sacct_state(job_id)


def _scontrol_state(job_id: str) -> SlurmJobState | None:
    try:
        out = run(["scontrol", "show", "job", "-o", job_id])
    except SlurmError:
        return None
    fields = dict(part.split("=", 1) for part in out.split() if "=" in part)
    if "JobState" not in fields:
        return None
    return SlurmJobState(fields["JobState"], fields.get("Reason", ""), fields.get("NodeList", ""),
                         fields.get("ExitCode", ""))


def _sacct_state(job_id: str) -> SlurmJobState | None:
    """Accounting's record, only where slurmdbd runs (without it sacct fails: then nothing is known)."""
    if shutil.which("sacct") is None:
        return None
    try:
        out = run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State,Reason,NodeList,ExitCode"])
    except SlurmError:
        return None
    line = next((row for row in out.splitlines() if row.strip()), "")
    parts = line.split("|")
    if len(parts) < 4:
        return None
    return SlurmJobState(parts[0].split()[0], parts[1], parts[2], parts[3])


def scancel(job_id: str, *, signal: str | None = None, batch_only: bool = False) -> None:
    """`scancel ID`; with `signal`, that signal instead of the end: to the batch step alone (`batch_only`, the
    job's main process: `--batch`), else to every process of the job (`--full`)."""
    argv = ["scancel", *([f"--signal={signal}", "--batch" if batch_only else "--full"] if signal else []), job_id]
    run(argv)


def requeue(job_id: str) -> None:
    """`scontrol requeue ID`: Slurm ends the running job and runs it again (SLURM_RESTART_COUNT + 1)."""
    run(["scontrol", "requeue", job_id])


def job_fields(job_id: str) -> dict[str, str]:
    """`scontrol show job -o ID` as KEY=VALUE pairs ({} when Slurm does not know it)."""
    try:
        out = run(["scontrol", "show", "job", "-o", job_id])
    except SlurmError:
        return {}
    return dict(part.split("=", 1) for part in out.split() if "=" in part)


@dataclass(frozen=True)
class Partition:
    """A partition as sinfo lists it: name, default or not, time limit, GRES per node, node names."""

    name: str
    default: bool
    time_limit: str
    gres: str
    nodes: str

    @property
    def has_gpus(self) -> bool:
        return "gpu" in self.gres


def partitions() -> list[Partition]:
    """Every partition (one line each), the default one marked by sinfo's trailing '*'."""
    out = run(["sinfo", "-h", "-o", "%P|%l|%G|%N"])
    seen: dict[str, Partition] = {}
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4:
            continue
        name, limit, gres, nodes = parts
        default = name.endswith("*")
        name = name.rstrip("*")
        if name in seen:  # one line per node state: merge the GRES and node lists
            old = seen[name]
            gres, nodes = ",".join(filter(None, (old.gres, gres))), ",".join(filter(None, (old.nodes, nodes)))
        seen[name] = Partition(name, default, limit, "" if gres == "(null)" else gres, nodes)
    return list(seen.values())


def hostnames(nodelist: str) -> list[str]:
    """`scontrol show hostnames` of a node list ("node[1-3]" -> node1, node2, node3)."""
    return run(["scontrol", "show", "hostnames", nodelist]).split() if nodelist else []


def clean_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The submitter's environment minus the GPU binding of this machine: Slurm sets the job's own
    (CUDA/HIP/ROCR_VISIBLE_DEVICES from gres) and an exported one from the login node must not override it."""
    drop = {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
            "DLGUIDE_GPU_SLOT"}
    # SLURM_JOB_*: a dashboard that itself runs inside a Slurm job (Open OnDemand) must not pass its own on.
    return {k: v for k, v in environ.items() if k not in drop and not k.startswith("SLURM_JOB")}
