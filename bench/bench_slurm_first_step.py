"""From submit to the first step visible: a local job vs the same job on Slurm (issue 20).

Starts the tests' single-node Slurm (tests/support/slurm.py: slurmctld + slurmd on loopback, a temp dir),
then, alternating, submits the same small cifar_net job through the CLI (`train ... --detach`) locally and
with `--executor slurm`, and times from the submit command's start to the first step row in the job store
(what the Train page's 1 s live view then draws), and to the job's end. Medians over the rounds.

    .venv/bin/python -m bench.bench_slurm_first_step [--rounds 3]    (root: Slurm needs munged)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import parser, report, result, skip
from dlguide_core.jobs.executors import tracking
from dlguide_core.jobs.store import JobStore
from tests.support import slurm
from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset


def one_job(executor: str, data: Path, home: Path) -> dict[str, float]:
    env = {**os.environ, "DLGUIDE_HOME": str(home)}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "dlguide_core", "train", "--recipe", "cifar_net", "--data",
                          str(data), "--max-steps", "3", "--batch-size", "2", "--workers", "0", "--device", "cpu",
                          "--executor", executor, "--detach", "--json"], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout
    submitted = time.monotonic() - started
    os.environ["DLGUIDE_HOME"] = str(home)
    store, job_id = JobStore(), json.loads(out)["job_id"]
    first = None
    while True:
        if first is None and store.last_step(job_id) is not None:
            first = time.monotonic() - started
        tracking.sync(store)
        if store.get(job_id).status not in ("queued", "running"):
            break
        time.sleep(0.05)
    status = store.get(job_id).status
    store.close()
    return {"submit_s": submitted, "first_step_s": first or float("nan"), "end_s": time.monotonic() - started,
            "ok": status == "succeeded"}


def main() -> int:
    options = parser(__doc__)
    options.add_argument("--rounds", type=int, default=3)
    args = options.parse_args()
    if reason := slurm.missing_reason():
        if args.quick:
            skip(f"no Slurm here: {reason}")
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    if args.quick:
        args.rounds = 1
    work = Path(tempfile.mkdtemp(prefix="bench_slurm_"))
    cluster = slurm.start_cluster(work / "slurm")
    os.environ.update(cluster.env)
    data = write_toy_dataset(work / "toy", classes=3, per_class=4, val_per_class=1)
    results: dict[str, list[dict[str, float]]] = {"local": [], "slurm": []}
    try:
        for _ in range(args.rounds):
            for executor in results:
                results[executor].append(one_job(executor, data, work / "home"))
    finally:
        cluster.stop()
    summary = {name: {key: statistics.median(r[key] for r in runs) for key in ("submit_s", "first_step_s", "end_s")}
               | {"succeeded": sum(r["ok"] for r in runs), "runs": len(runs)} for name, runs in results.items()}
    for name in ("local", "slurm"):
        s = summary[name]
        print(f"{name:<6} submit {s['submit_s']:.1f} s  first step {s['first_step_s']:.1f} s  end {s['end_s']:.1f} s"
              f"  ({s['succeeded']}/{s['runs']} succeeded)")
    report(result("bench_slurm_first_step", {**summary, "loadavg_1min": os.getloadavg()[0]}), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
