"""Who stopped a Slurm job, decided once, in the job's main process (jobs.executors.job_entry), after its
checkpointed stop: the user (`cancelled`) or the scheduler (`interrupted`, or requeued as the same job).

Every stop from Slurm is a TERM, and a plain `scancel`, a preemption and the time limit send it to every process
of the job (SERVERS.md). The helpers (DataLoader workers: training.factories.ignore_stop_signals; torchrun's
workers, which stop together with their agent) never decide. What tells the stops apart, read from
`scontrol show job` when the run has stopped (the job is still there: its process has not exited), and the line
slurmstepd writes into the job's output just before it sends the TERM (`*** JOB 7 ON n1 CANCELLED AT <time> DUE
TO PREEMPTION ***`; a plain scancel's line has no "DUE TO"). Seen on Slurm 22.05: a preemption's TERM comes with
JobState=COMPLETING and Restarts already one above the run's SLURM_RESTART_COUNT, PreemptTime unset. A node that
dies: the ranks elsewhere stop at once (a peer failure, `interrupted`), srun waits for the lost task until
slurmctld declares the node DOWN (SlurmdTimeout), requeues the job and TERMs what is left, with `... DUE TO NODE
FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***` and Restarts one above. srun itself may end first, as soon as
slurmctld tells it (`srun: error: Node failure on n2`), racing stepd's line and the requeue: its line in this run's
output is the same cause (seen once in a test under load: judged before stepd wrote, the run ended "interrupted"
and Slurm's next run took it back from there). A run whose processes ended on their own (a
rank killed, its node alive) while Slurm still runs the job and sent it no TERM was stopped by nobody: it stays
`interrupted` with the run's own reason (a plain scancel would have ended it `cancelled` before).

| what Slurm shows                                         | the stop                | dlguide status             |
|----------------------------------------------------------|-------------------------|----------------------------|
| the store's cancel flag (dlguide's own cancel)           | the user, via dlguide   | cancelled                  |
| DUE TO PREEMPTION, or PreemptTime set                    | preemption              | queued (Slurm requeues it) |
| DUE TO NODE FAILURE, NODE_FAIL, DEADLINE, BOOT_FAIL      | the cluster             | queued, else interrupted   |
| (or srun's `error: Node failure on N` in this run's log)  |                         |                            |
| DUE TO JOB REQUEUE, or Restarts > SLURM_RESTART_COUNT    | `scontrol requeue`      | queued (Slurm requeues it) |
| RUNNING, no stepd line, no TERM (processes failed)       | nobody: the run's own   | interrupted (its reason)   |
| DUE TO TIME LIMIT, TIMEOUT, or RUNNING near EndTime      | the time limit          | interrupted (or queued     |
|                                                          |                         | with --requeue-on-timeout) |
| anything else (a plain `scancel`, `scancel --signal`)    | the user                | cancelled                  |
| no answer from Slurm                                     | unknown                 | interrupted (resumable)    |

A requeue without `--requeue` (or past `--max-requeues`) is `interrupted`. When Slurm will not requeue the job
itself (preemption's first TERM reached only the job steps and the job is still RUNNING, or the time limit with
--requeue-on-timeout), the main process asks for it with `scontrol requeue`, as Lightning's auto_requeue does.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

NONE = ("", "None", "(null)", "Unknown")
SIGNAL_BEFORE_S = 60  # --signal=B:TERM@60: the warning before the time limit (jobs.executors.slurm_script)
MAX_REQUEUES = 5  # --max-requeues' default: a job Slurm keeps requeueing ends interrupted after this many
CLUSTER_ENDS = {"NODE_FAIL": "a node failed", "DEADLINE": "its deadline passed", "BOOT_FAIL": "a node did not boot"}
# "... DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***" (22.05): the cause ends at a comma
STEPD_LINE = re.compile(r"\*\*\* JOB (\d+) ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?)(?:, [^*]*?)?)? \*\*\*")
# srun's own word on a node failure, before or without stepd's line
SRUN_NODE_FAILURE = re.compile(r"^srun: error: Node failure on \S+", re.MULTILINE)
TIME_MARGIN_S = 30  # a TERM this close to the signal lead before EndTime is the time limit's


@dataclass(frozen=True)
class RequeuePolicy:
    """What a stop by Slurm does, as the job's submit chose it: SlurmOptions' fields of the same names, read back
    from the job folder (executor.json) by the job's own process."""

    requeue: bool = True
    requeue_on_timeout: bool = False
    max_requeues: int = MAX_REQUEUES
    time: str | None = None


@dataclass(frozen=True)
class SlurmStop:
    """The verdict: `status` cancelled | interrupted | queued (Slurm runs the same job again), why, and whether
    this process must ask Slurm for the requeue (`scontrol requeue`)."""

    status: str
    reason: str
    requeue_self: bool = False


def slurm_job_id() -> str | None:
    """This process's Slurm job id (None outside a Slurm job)."""
    return os.environ.get("SLURM_JOB_ID") or None


def restart_count() -> int:
    """How many times Slurm has requeued this job before this run (SLURM_RESTART_COUNT; unset on the first)."""
    try:
        return int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    except ValueError:
        return 0


def stepd_cause(log_tail: str, external_id: str) -> str | None:
    """The cause in slurmstepd's last `*** JOB N ... CANCELLED AT T [DUE TO X] ***` line: X, "" for none (a plain
    scancel), None when there is no such line (a signal only: `scancel --signal`, the time limit's warning).
    Without a stepd line, srun's `error: Node failure on N` is "NODE FAILURE": srun may end on it before stepd
    writes (`log_tail`: this run's part of the job's output only)."""
    found = None
    for match in STEPD_LINE.finditer(log_tail):
        if match.group(1) == external_id:
            found = (match.group(2) or "").strip()
    if found is None and SRUN_NODE_FAILURE.search(log_tail):
        return "NODE FAILURE"
    return found


# A stop its run had no time to judge (Slurm killed the batch script first): its cause read back from the output
UNSEEN_STOPS = {"NODE FAILURE": "a node failed", "PREEMPTION": "preempted", "JOB REQUEUE": "requeued by Slurm"}


def unseen_stop_note(cause: str | None) -> str | None:
    """The restart note's start ("a node failed at step ", the checkpoint's step to follow) for a stop of `cause`
    (stepd_cause of the previous run's output) that the previous run did not record; None when the cause says
    nothing (the store's "stopped without a word" stays)."""
    label = UNSEEN_STOPS.get(cause or "")
    return f"{label} at step " if label else None


def judge(fields: Mapping[str, str], *, cancel_flag: bool, step: int | None, restart: int, requeue: bool,
          requeue_on_timeout: bool, time_limit: str | None, cause: str | None = None,
          now: float | None = None, signalled: bool = True) -> SlurmStop:
    """The stop of a run that ended cancelled or interrupted (see the module's table). `fields`: `scontrol show
    job -o`; `cause`: stepd_cause of the job's output; `signalled`: a stop signal reached the job (its main
    process got TERM or INT, or its ranks stopped cleanly at one); else its processes ended on their own."""
    at = f" at step {step}" if step is not None else ""
    if cancel_flag:
        return SlurmStop("cancelled", f"cancelled{at}")
    if not fields:
        return SlurmStop("interrupted", f"stopped by SIGTERM{at} (Slurm did not say why); resume continues it")
    state = fields.get("JobState", "").split("+")[0]
    requeuable = requeue and fields.get("Requeue", "1") != "0"
    if cause == "PREEMPTION" or fields.get("PreemptTime", "None") not in NONE:
        return _requeue_or_stop(f"preempted{at}", requeuable, self_needed=state == "RUNNING")
    # Before Restarts: Slurm requeues a node failure's job before it TERMs what is left of it
    if cause == "NODE FAILURE" or state in CLUSTER_ENDS:
        return _requeue_or_stop(f"{CLUSTER_ENDS.get(state, 'a node failed')}{at}", requeuable, self_needed=False)
    if cause == "JOB REQUEUE" or _int(fields.get("Restarts")) > restart:
        return _requeue_or_stop(f"requeued by Slurm{at}", requeuable, self_needed=False)
    if not signalled and cause is None and state == "RUNNING":  # a rank killed or crashed: not a cancel
        return SlurmStop("interrupted", f"a process of the run ended{at} while Slurm still ran the job; resume "
                         "continues it")
    # A signal alone leaves the job RUNNING (slurmstepd logs a cause-less line for it too): the warning that
    # --signal=B:TERM@ sends before the limit, when EndTime is that close. A cancelled job's EndTime is the
    # cancel's time, so EndTime says nothing once the job is ending.
    if cause == "TIME LIMIT" or state == "TIMEOUT" or (state == "RUNNING" and _near_end(fields.get("EndTime", ""),
                                                                                        time_limit, now)):
        if requeue_on_timeout and requeuable:
            return SlurmStop("queued", f"stopped by SIGTERM before the time limit{at}", requeue_self=True)
        return SlurmStop("interrupted", f"stopped by SIGTERM before the time limit{at}; resume continues it")
    return SlurmStop("cancelled", f"cancelled in Slurm (scancel){at}")


def _requeue_or_stop(what: str, requeuable: bool, *, self_needed: bool) -> SlurmStop:
    if requeuable:
        return SlurmStop("queued", what, requeue_self=self_needed)
    return SlurmStop("interrupted", f"{what} (submitted with --no-requeue); resume continues it")


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _near_end(end_time: str, time_limit: str | None, now: float | None) -> bool:
    if end_time in NONE:
        return False
    try:
        end = datetime.fromisoformat(end_time).timestamp()  # Slurm prints local time, as datetime reads it
    except ValueError:
        return False
    now = time.time() if now is None else now
    return end - now <= signal_lead(time_limit) + TIME_MARGIN_S


def time_seconds(value: str) -> int:
    """Seconds of a Slurm time limit: [D-]HH:MM:SS, MM:SS or MM."""
    days, _, clock = value.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if len(parts) == 1:
        seconds = parts[0] * 60
    elif len(parts) == 2:
        seconds = parts[0] * 60 + parts[1]
    else:
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return seconds + int(days or 0) * 86400


def signal_lead(time_limit: str | None) -> int:
    """Seconds before the limit at which Slurm sends TERM: 60, or half of a limit under two minutes."""
    if not time_limit:
        return SIGNAL_BEFORE_S
    return max(10, min(SIGNAL_BEFORE_S, time_seconds(time_limit) // 2))
