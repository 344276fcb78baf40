"""Start-up time and peak memory of the CLI's light commands, this checkout against an older one.

    .venv/bin/python -m bench.bench_cli_startup [--before /tmp/i10-before] [--repeat 3]

`--before` is another checkout of the project (e.g. `git worktree add --detach /tmp/i10-before aa86395`),
run with this checkout's Python. Each command runs in a fresh child process over one store holding
a finished job with 2,000 steps and 2 epochs; the time is the child's wall time, the memory its peak
RSS (`os.wait4`'s rusage of that child alone). Medians of `--repeat` runs.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import parser, report, result
from tests.support.paths import ROOT


def make_store(home: Path) -> str:
    """A finished job with steps and epochs, written by this checkout's store."""
    os.environ["DLGUIDE_HOME"] = str(home)
    from dlguide_core.jobs.store import JobStore

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {"epochs": 2, "batch_size": 4, "lr": 0.001})
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, 2000, 2, ("a", "b"))
    now = time.time()
    store.add_steps([(job.id, s, s // 1000, 2.0 / s, 0.001, 40.0, now + s, None) for s in range(1, 2001)])
    for epoch in range(2):
        store.add_epoch(job.id, epoch, {"train_loss": 1.0, "val_loss": 1.1, "top1": 50.0, "top5": 90.0})
    store.finish(job.id, "succeeded")
    store.close()
    return job.id


def measure(checkout: Path, argv: list[str], home: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of `python -m dlguide_core ARGV` run in `checkout`."""
    env = {**os.environ, "DLGUIDE_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dlguide_core", *argv], cwd=checkout, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {checkout} exited {proc.returncode}")
    return elapsed, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--before", type=Path, help="an older checkout to compare with")
    options.add_argument("--repeat", type=int, default=3)
    args = options.parse_args()
    if args.quick:
        args.repeat = 1
    home = Path(tempfile.mkdtemp(prefix="dlguide-cli-bench-"))
    job_id = make_store(home)
    commands = [["--help"], ["jobs", "list", "--json"], ["jobs", "show", job_id, "--json"],
                ["jobs", "export", job_id, "--csv"]]
    checkouts = {"before": args.before, "after": ROOT} if args.before else {"after": ROOT}
    rows: list[dict[str, str | float]] = []
    for argv in commands:
        row: dict[str, str | float] = {"command": " ".join(argv).replace(job_id, "ID")}
        for name, checkout in checkouts.items():
            runs = [measure(checkout, argv, home) for _ in range(args.repeat)]
            row[f"{name}_s"] = round(statistics.median(r[0] for r in runs), 3)
            row[f"{name}_mb"] = round(statistics.median(r[1] for r in runs), 1)
        rows.append(row)
    report(result("bench_cli_startup", {"rows": rows}), args.json)
    print("\n| command | " + " | ".join(f"{n} s | {n} MB" for n in checkouts) + " |")
    print("|---|" + "---|---|" * len(checkouts))
    for row in rows:
        print(f"| `{row['command']}` | " + " | ".join(f"{row[f'{n}_s']} | {row[f'{n}_mb']}" for n in checkouts) + " |")


if __name__ == "__main__":
    main()
