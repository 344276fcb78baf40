"""How a PyTorch job is launched: one process, or torchrun over N per machine on M machines.

The launch plan (`LaunchSpec`), the torchrun command lines for this machine and the join commands for
the others, and what batch size a plan means. It imports no torch (the job queue and the CLI's
`jobs list` launch queued jobs through it); `device_options` asks torch only when called.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from dlguide_core.errors import DistributedError
from dlguide_core.jobs.job import launch_fields
from dlguide_core.training.configs import rdzv_endpoint_problem

RDZV_ID = "dlguide"  # the same on every node of a run (a run is told apart by its endpoint)
MONITOR_INTERVAL_S = 0.5  # how often torchrun checks its workers: a dead rank is seen within this


def global_batch(batch_size: int, nproc_per_node: int = 1, nnodes: int = 1) -> int:
    """Images per optimiser step over the whole run: `batch_size` is per device."""
    return batch_size * nproc_per_node * nnodes


def describe_batch(batch_size: int, nproc_per_node: int = 1, nnodes: int = 1) -> str:
    """"global batch 64 (32 per device x 2 processes x 1 machine)", for the CLI and the Train page."""
    return (f"global batch {global_batch(batch_size, nproc_per_node, nnodes)} ({batch_size} per device"
            f" x {nproc_per_node} process{'es' if nproc_per_node != 1 else ''}"
            f" x {nnodes} machine{'s' if nnodes != 1 else ''})")



@dataclass(frozen=True)
class LaunchSpec:
    """How many processes on how many machines; `node_rank` 0 is the machine with the job store."""

    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str = ""
    max_restarts: int = 0

    def __post_init__(self) -> None:
        if self.nproc_per_node < 1 or self.nnodes < 1:
            raise DistributedError("--nproc-per-node and --nnodes must be at least 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise DistributedError(f"--node-rank must be in 0..{self.nnodes - 1}")
        if self.max_restarts < 0:
            raise DistributedError("--max-restarts cannot be negative")
        if self.nnodes > 1 and (problem := rdzv_endpoint_problem(self.rdzv_endpoint)):
            raise DistributedError(problem)

    @property
    def uses_torchrun(self) -> bool:
        return self.nproc_per_node > 1 or self.nnodes > 1 or self.max_restarts > 0

    @property
    def world_size(self) -> int:
        """The planned world size (torchrun's, if every machine runs nproc_per_node processes)."""
        return self.nproc_per_node * self.nnodes


def device_options() -> tuple[int, str]:
    """(most processes for one machine, what each one drives): one per GPU PyTorch sees; without GPUs,
    up to one Gloo process per CPU core (at least 2), for trying data-parallel training out."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.device_count(), "GPU"
    return max(os.cpu_count() or 1, 2), "CPU process"


def torchrun_args(spec: LaunchSpec) -> list[str]:
    """torchrun's own flags: standalone (a free local port) on one machine, c10d rendezvous across several."""
    args = ["--nproc-per-node", str(spec.nproc_per_node), "--max-restarts", str(spec.max_restarts),
            "--monitor-interval", str(MONITOR_INTERVAL_S)]
    if spec.nnodes == 1:
        return [*args, "--standalone"]
    # No --node-rank: c10d numbers the machines itself (ours only says which machine holds the job).
    return [*args, "--nnodes", str(spec.nnodes), "--rdzv-backend", "c10d", "--rdzv-endpoint", spec.rdzv_endpoint,
            "--rdzv-id", RDZV_ID]


def torchrun_command(spec: LaunchSpec, job_id: str | None = None, data: str | None = None) -> list[str]:
    """`python -m torch.distributed.run ... -m dlguide_core.jobs.worker JOB_ID` (torchrun, as this Python).

    Machines other than node 0 have no job record: they run `worker --join DATA`
    and receive the recipe and config from the writer rank.
    """
    entry = [job_id] if job_id else ["--join", data or ""]
    return [sys.executable, "-m", "torch.distributed.run", *torchrun_args(spec), "-m", "dlguide_core.jobs.worker",
            *entry]


def join_commands(spec: LaunchSpec, recipe: str, data: str = "/path/to/the/same/dataset") -> list[str]:
    """The command to run on each other machine (node ranks 1..nnodes-1) of a multi-node run."""
    commands = []
    for node in range(1, spec.nnodes):
        argv = ["python", "-m", "dlguide_core", "train", "--recipe", recipe, "--data", data,
                "--nproc-per-node", str(spec.nproc_per_node), "--nnodes", str(spec.nnodes),
                "--node-rank", str(node), "--rdzv-endpoint", spec.rdzv_endpoint]
        if spec.max_restarts:
            argv += ["--max-restarts", str(spec.max_restarts)]
        commands.append(shlex.join(argv))
    return commands


def launch_spec_from_config(config: Mapping[str, object]) -> LaunchSpec:
    """The launch a stored job asks for (node 0's view; fields absent in old jobs mean one process)."""
    fields = launch_fields(config)
    return LaunchSpec(nproc_per_node=fields.nproc_per_node, nnodes=fields.nnodes, rdzv_endpoint=fields.rdzv_endpoint,
                      max_restarts=fields.max_restarts)


def endpoint_unresolved(endpoint: str) -> str | None:
    """Why a joining node cannot reach `endpoint`'s host (its name does not resolve here), or None. torchrun
    would otherwise end in a traceback of its own."""
    import socket

    host = endpoint.rpartition(":")[0].strip("[]")
    try:
        socket.getaddrinfo(host, None)
    except OSError as exc:
        return f"--rdzv-endpoint {endpoint}: the host {host!r} cannot be resolved here ({exc.strerror or exc})"
    return None
