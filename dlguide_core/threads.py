"""Threads and waiting, decided once per kind of process: the server, a job process, the CLI, a benchmark.

torch (OpenMP), and ONNX Runtime each keep a pool of intra-op threads per process, and by default an idle
worker of that pool spins (busy-waits) before it sleeps. Alone on a machine that saves a few microseconds per
parallel section; beside other work it burns the very time slices the pool's other threads need. Measured on
the shared 2-core box (bench/bench_thread_policy.py, /work/notes/perf-bench.md): eager Inception v3 batch 1
took 5-20x its quiet p50 with one training job on the host under the runtimes' default wait policy, and stayed
within about 2x with OMP_WAIT_POLICY=PASSIVE (ONNX Runtime: 1.9-2.1x lower p50 without spinning, issue 26).
So every kind of process blocks instead of spinning; a server on a host that also trains must never spin.

Each process declares its kind once, at its entry, before torch is imported (OpenMP reads its environment when
its runtime starts, i.e. when torch loads): serve.py (server), `python -m dlguide_core` (cli; `train` in the
foreground is a job, `bench` a benchmark), the job process (jobs.runner, jobs.worker, executors.job_entry) and
the local launcher's environment (jobs.queue.job_env), so a job started by the server gets the job's policy.
Nothing else in dlguide sets torch's thread counts, OMP_WAIT_POLICY or ONNX Runtime's spinning
(tests/test_architecture.py).

The usual variables still win: OMP_WAIT_POLICY and OMP_NUM_THREADS set by the user are kept (torch reads
OMP_NUM_THREADS for its intra-op pool). DLGUIDE_THREAD_POLICY=off makes dlguide decide nothing (the runtimes'
own defaults, as before this module; bench/bench_thread_policy.py uses it for the "before" rows).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ProcessKind = Literal["server", "job", "cli", "bench"]
OFF_ENV = "DLGUIDE_THREAD_POLICY"  # "off": leave threads and waiting to the runtimes
DECIDED_ENV = "DLGUIDE_THREADS_DECIDED"  # the variables dlguide set itself (a child of another kind replaces them)
WAIT_ENV, THREADS_ENV = "OMP_WAIT_POLICY", "OMP_NUM_THREADS"


@dataclass(frozen=True)
class ThreadPolicy:
    """How one kind of process uses the CPU's cores.

    intra_op_threads: torch's (OpenMP's) intra-op pool; 0 = one per physical core (torch's own default; not written
    into OMP_NUM_THREADS, which torchrun reads to give each of its workers 1 thread). A thread that runs forwards
    for the process (a server's forward worker) calls apply_in_thread() first. inter_op_threads: torch's
    inter-op pool (0 = torch's default; eager inference and training never fan out across it).
    wait_policy: OMP_WAIT_POLICY. ort_spinning: ONNX Runtime's intra-/inter-op workers spin while waiting."""

    kind: ProcessKind
    wait_policy: Literal["PASSIVE", "ACTIVE"] = "PASSIVE"
    intra_op_threads: int = 0
    inter_op_threads: int = 0
    ort_spinning: bool = False
    why: str = ""


POLICIES: dict[ProcessKind, ThreadPolicy] = {
    # One forward worker answers every visitor; a training job may share the host: its pool must not spin.
    "server": ThreadPolicy("server", why="serves forwards beside training jobs and other visitors: never spin"),
    # Training beside the server: blocking waits cost the job about nothing and give the server its cores back.
    "job": ThreadPolicy("job", why="trains beside the server and other jobs: never spin"),
    "cli": ThreadPolicy("cli", why="classify/evaluate/export from a shell, maybe beside jobs: never spin"),
    # A benchmark times the same way the server serves, so its figures hold for the app.
    "bench": ThreadPolicy("bench", why="times what the server runs, under the server's policy"),
}
_declared: ThreadPolicy | None = None


def physical_cores() -> int:
    """Physical cores (not hyper-threads): what an intra-op pool should use on a CPU (psutil, else all CPUs)."""
    import psutil

    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def policy_off(environ: Mapping[str, str] | None = None) -> bool:
    return (os.environ if environ is None else environ).get(OFF_ENV, "").strip().lower() == "off"


def environment(kind: ProcessKind, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a process of `kind` must start with, given the environment it inherits: the policy's
    OMP_WAIT_POLICY (and OMP_NUM_THREADS where a policy fixes a count), except where the user set their own (kept);
    {} when the policy is off.
    Variables another kind's declaration put there (DLGUIDE_THREADS_DECIDED) are this kind's to replace."""
    if policy_off(environ):
        return {}
    policy = POLICIES[kind]
    ours: dict[str, str] = {WAIT_ENV: policy.wait_policy}
    if policy.intra_op_threads:  # 0: left to torch (physical cores) and to launchers: torchrun gives each worker 1
        ours[THREADS_ENV] = str(policy.intra_op_threads)
    decided = set(filter(None, environ.get(DECIDED_ENV, "").split(",")))
    chosen = {name: value for name, value in ours.items() if name not in environ or name in decided}
    if chosen:
        chosen[DECIDED_ENV] = ",".join(sorted(decided | set(chosen)))
    return chosen


def declare(kind: ProcessKind) -> ThreadPolicy:
    """This process is of `kind`: put its policy in the environment (before torch loads OpenMP, which reads it
    once) and in torch if torch is already loaded. Called once, at the process's entry; later calls (a CLI
    command run inside a test process) only re-apply."""
    global _declared
    policy = POLICIES[kind]
    _declared = policy
    os.environ.update(environment(kind, os.environ))
    if "torch._C" in sys.modules:  # torch loaded: too late for OpenMP's wait policy here; thread counts still apply
        apply_in_thread()
    return policy


def current() -> ThreadPolicy:
    """The declared policy of this process (a process that declared nothing, a test, is a CLI)."""
    return _declared or POLICIES["cli"]


def intra_op_threads() -> int:
    """The intra-op threads of this process: OMP_NUM_THREADS when set (the user's or the policy's), else the
    policy's, else one per physical core."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else (current().intra_op_threads or physical_cores())


def apply_in_thread() -> None:
    """Give the calling thread the process's torch thread counts. OpenMP keeps its thread count per calling
    thread, starting from OMP_NUM_THREADS: a thread started before the environment was set (or after a
    torch.set_num_threads elsewhere) calls this first, e.g. a server's forward worker. No-op when off."""
    if policy_off():
        return
    import torch

    torch.set_num_threads(intra_op_threads())
    if (inter := current().inter_op_threads) and torch.get_num_interop_threads() != inter:
        try:
            torch.set_num_interop_threads(inter)
        except RuntimeError:  # torch allows it once, before any inter-op work: the pool already runs
            pass


def ort_session_config() -> dict[str, str]:
    """ONNX Runtime session config entries for this process: its intra- and inter-op workers block ("0") unless
    the policy is off (then ORT's own default, "1": spin)."""
    spin = "1" if policy_off() or current().ort_spinning else "0"
    return {"session.intra_op.allow_spinning": spin, "session.inter_op.allow_spinning": spin}


def command_kind(command: str, *, foreground_job: bool = False) -> ProcessKind:
    """The kind of a `python -m dlguide_core COMMAND` process: `bench` benchmarks, a job run in the foreground
    (`train`, `jobs resume` without --detach) is a job process, everything else the CLI."""
    if command == "bench":
        return "bench"
    return "job" if foreground_job else "cli"
