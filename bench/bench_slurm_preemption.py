"""Preemption on a real Slurm (issue 32): from the preemption to the first step after resume, and steps lost.

Starts the tests' single-node Slurm (tests/support/slurm.py: partitions `low` PriorityTier=1 and `high`
PriorityTier=2, PreemptMode=REQUEUE, GraceTime from DLGUIDE_TEST_SLURM_GRACE, default 0; AuthInfo=cred_expire=5),
submits a cifar_net job (2 DataLoader workers) on `low`, waits for STEPS_BEFORE steps, then submits a job on
`high` that needs every CPU of the node. Times, from that submit: the TERM (slurmstepd's "DUE TO PREEMPTION"
line, to the second), the job back in the store as running (the requeued run took it back), and its first new
step row. Steps redone = the steps recorded before the preemption past the checkpoint it resumed from (rows are
trimmed and run again): 0 when the stop checkpointed. Medians over the rounds.

    .venv/bin/python -m bench.bench_slurm_preemption [--rounds 3]    (root: Slurm needs munged)
"""

from __future__ import annotations

import io
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

from bench.common import parser, report, result, skip
from dlguide_core.cli.main import main as cli
from dlguide_core.jobs.executors import tracking
from dlguide_core.jobs.job import Job
from dlguide_core.jobs.store import JobStore
from tests.support import slurm
from tests.support.toy_data import write_toy_dataset

# The run must outlast the preemption's way in (a scheduler pass, then the TERM: up to a few seconds on a loaded
# box, when the job does about 50 steps a second): 200 steps ended before it in a --quick run beside the suite.
STEPS_BEFORE, MAX_STEPS = 20, 1000


def _wait(predicate, timeout: float = 600, every: float = 0.05):  # noqa: ANN001, ANN202 - a local poll
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(every)
    raise TimeoutError("waited too long")


def _last_step(store: JobStore, job_id: str) -> int:
    row = store.last_step(job_id)
    return row["step"] if row else 0


def _taken_back(store: JobStore, job_id: str) -> Job | None:
    """The job once the requeued run took it back (a restart counted), or once it ended without one."""
    job = store.get(job_id, refresh=False)
    return job if job.restarts >= 1 or job.status == "succeeded" else None


def one_round(cluster: slurm.SlurmCluster, data: Path, steps_before: int = STEPS_BEFORE,
              max_steps: int = MAX_STEPS, finish: bool = True) -> dict[str, float]:
    """One preemption, timed. `finish`: the job runs to its last step (each step once, then succeeded); else it
    is cancelled once its first step after the resume is recorded (--quick: the steps so far each once)."""
    out = io.StringIO()
    with redirect_stdout(out):
        cli(["train", "--recipe", "cifar_net", "--data", str(data), "--epochs", "1000", "--max-steps",
             str(max_steps), "--batch-size", "2", "--workers", "2", "--device", "cpu", "--partition", "low",
             "--executor", "slurm", "--detach", "--json"])
    store, job_id = JobStore(), json.loads(out.getvalue())["job_id"]
    _wait(lambda: _last_step(store, job_id) >= steps_before)
    started, wall = time.monotonic(), time.time()
    cluster.command("sbatch", "--parsable", "-p", "high", "-c", str(slurm.NODE_CPUS), "-o", "/dev/null", "--wrap",
                    "sleep 1")
    taken = _wait(lambda: _taken_back(store, job_id))
    if taken.restarts == 0:
        raise RuntimeError(f"the job reached its {max_steps} steps before the preemption did: raise MAX_STEPS")
    back = time.monotonic() - started
    resumed_from = store.get(job_id, refresh=False).checkpoint_step or 0
    before = {r for r in store.steps(job_id)["step"] if r <= resumed_from}
    first = _wait(lambda: _last_step(store, job_id) > resumed_from) and time.monotonic() - started
    if not finish:
        with redirect_stdout(io.StringIO()):
            cli(["jobs", "cancel", job_id])
    _wait(lambda: tracking.sync(store) is not None and store.get(job_id).status not in ("queued", "running"))
    job = store.get(job_id)
    steps = store.steps(job_id)["step"]
    log = (job.job_dir / f"slurm-{job.external_id}.out").read_text(errors="replace")
    stamp = log.split("DUE TO PREEMPTION")[0].rsplit("CANCELLED AT ", 1)[-1].strip()
    term_s = time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")) - wall
    note = job.restart_note or ""
    stopped_at = int(note.rsplit(" ", 1)[-1]) if note.rsplit(" ", 1)[-1].isdigit() else resumed_from
    store.close()
    ended, last = ("succeeded", max_steps) if finish else ("cancelled", len(steps))
    return {"term_s": term_s, "back_s": back, "first_step_s": first, "steps_redone": stopped_at - resumed_from,
            "ok": job.status == ended and steps == list(range(1, last + 1)) and len(before) >= 1,
            "restarts": job.restarts}


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=3)
    args = options.parse_args()
    if reason := slurm.missing_reason():
        if args.quick:
            skip(f"no Slurm here: {reason}")
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    steps_before = 5 if args.quick else STEPS_BEFORE
    if args.quick:
        args.rounds = 1
    work = Path(tempfile.mkdtemp(prefix="bench_slurm_preempt_"))
    cluster = slurm.start_cluster(work / "slurm")
    os.environ.update(cluster.env)
    os.environ["DLGUIDE_HOME"] = str(work / "home")
    data = write_toy_dataset(work / "toy", classes=3, per_class=8, val_per_class=1)
    try:
        runs = [one_round(cluster, data, steps_before, finish=not args.quick) for _ in range(args.rounds)]
    finally:
        cluster.stop()
    summary = {key: statistics.median(r[key] for r in runs) for key in ("term_s", "back_s", "first_step_s")}
    summary |= {"steps_redone_max": max(r["steps_redone"] for r in runs), "succeeded": sum(r["ok"] for r in runs),
                "runs": len(runs), "grace_s": slurm.GRACE_S, "loadavg_1min": os.getloadavg()[0]}
    print(f"preemption (high job submitted) -> TERM {summary['term_s']:.0f} s, job taken back "
          f"{summary['back_s']:.1f} s, first step after resume {summary['first_step_s']:.1f} s "
          f"(medians of {len(runs)}, GraceTime {slurm.GRACE_S}); steps redone past the checkpoint: "
          f"{summary['steps_redone_max']}; {summary['succeeded']}/{len(runs)} ended as planned "
          f"(--quick: cancelled after the resume) with each step once")
    report(result("bench_slurm_preemption", summary), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
