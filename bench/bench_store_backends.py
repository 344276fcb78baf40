"""The job store on PostgreSQL beside SQLite (issue 19), in one run on this machine.

    .venv/bin/python -m bench.bench_store_backends [--quick]

Starts a throwaway PostgreSQL server (tests/support/postgres.py: needs root and Debian's postgresql)
and measures on each backend:
1. streaming overhead per training step (tests/support/training_timing.py: a real cifar_net loop);
2. end of a step to readable by another process, p50/p95 (training_timing.readable_latency);
3. the Train page at 100,000 steps: the first full read, and a refresh (the cache check `has_step`
   plus the new rows, `steps(after=...)`, then the figures), medians of 20;
4. the CLI's light commands' start-up and peak RSS (bench/bench_cli_startup.py, in a fresh process).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import parser, report, result, skip
from tests.support.paths import ROOT
from tests.support.postgres import PostgresServer, unavailable_reason
from tests.support.training_timing import figures, readable_latency, streaming_overhead


def page_reads(steps: int, rounds: int = 20) -> dict[str, float]:
    """What the Train page asks of the store at `steps` steps, medians in seconds: the first full
    read, a refresh's reads (the cache check `has_step` plus the new rows, `steps(after=...)`), and
    the whole refresh (those reads plus the page's figures, training_timing.figures)."""
    from dlguide_core.jobs.store import JobStore

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    now = time.time()
    for first in range(1, steps + 1, 10_000):
        store.add_steps([(job.id, s, s // 1000, 2.0 / s, 0.1, 50.0, now + s * 0.01, None)
                         for s in range(first, min(first + 10_000, steps + 1))])
    store.finish(job.id, "succeeded")
    full, reads, refresh = [], [], []
    cols = store.steps(job.id)
    for _ in range(rounds):
        start = time.perf_counter()
        store.steps(job.id)
        full.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert store.has_step(job.id, cols["step"][-6], cols["time"][-6])
        store.steps(job.id, after=steps - 5)
        reads.append(time.perf_counter() - start)
        figures(cols)
        refresh.append(time.perf_counter() - start)
    store.close()
    return {k: statistics.median(v) for k, v in (("full", full), ("reads", reads), ("refresh", refresh))}


def cli_startup(url: str | None) -> str:
    """bench_cli_startup.py's table (--help, jobs list/show/export) over this backend, run in a fresh
    process: a child forked from this one (torch loaded) would report this process's memory as its peak."""
    env = {k: v for k, v in os.environ.items() if k != "DLGUIDE_STORE_URL"}
    env.update({"DLGUIDE_STORE_URL": url} if url else {})
    done = subprocess.run([sys.executable, "-m", "bench.bench_cli_startup", "--repeat", "5"], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=True)
    return done.stdout[done.stdout.index("| command"):]


def main() -> None:
    args = parser(__doc__).parse_args()
    if (reason := unavailable_reason()) is not None:
        if args.quick:
            skip(f"no PostgreSQL here: {reason}")
        raise SystemExit(reason)
    server = PostgresServer().start()
    try:
        backends = {"sqlite": None, "postgresql": server.create_database()}
        home = Path(tempfile.mkdtemp(prefix="bench-store-"))
        os.environ["DLGUIDE_HOME"] = str(home)
        from tests.support.toy_data import write_toy_dataset

        data = write_toy_dataset(home / "toy", classes=10, per_class=10 if args.quick else 100, val_per_class=2)
        reads = {}
        for name, url in backends.items():
            if url:
                os.environ["DLGUIDE_STORE_URL"] = url
            print(f"--- {name}")
            streaming_overhead(data, 1 if args.quick else 6)
            readable_latency(20 if args.quick else 300, 0.02)
            steps = 2_000 if args.quick else 100_000
            reads[name] = page_reads(steps, 3 if args.quick else 20)
            print(f"Train page at {steps:,} steps: first read {reads[name]['full'] * 1e3:.0f} ms; refresh "
                  f"{reads[name]['refresh'] * 1e3:.0f} ms, of which store reads {reads[name]['reads'] * 1e3:.1f} ms")
            if url:
                server.psql("DROP SCHEMA public CASCADE; CREATE SCHEMA public AUTHORIZATION dlguide_test",
                            db=url.rsplit("/", 1)[1])  # a store with only the start-up bench's job
            if not args.quick:  # the CLI's start-up: fresh processes, tens of seconds
                print(cli_startup(url))
        sqlite, postgres = reads["sqlite"], reads["postgresql"]
        print("PostgreSQL / SQLite: " + ", ".join(f"{k} {postgres[k] / sqlite[k]:.2f}x" for k in sqlite))
        report(result("bench_store_backends", {"page_reads_s": reads}), args.json)
    finally:
        server.close()


if __name__ == "__main__":
    main()
