"""The job store on PostgreSQL beside SQLite (issue 19), in one run on this machine.

    .venv/bin/python bench/bench_store_backends.py [--quick]

Starts a throwaway PostgreSQL server (tests/support/postgres.py: needs root and Debian's postgresql)
and measures on each backend:
1. streaming overhead per training step (bench_training.streaming_overhead: a real cifar_net loop);
2. end of a step to readable by another process, p50/p95 (bench_training.readable_latency);
3. the Train page's store reads at 100,000 steps: the first full read, and a refresh (the cache
   check `has_step` plus the new rows, `steps(after=...)`), medians of 20;
4. `jobs list --json` start-up in a fresh process: wall time and peak RSS (bench_cli_startup.measure).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.postgres import PostgresServer, unavailable_reason  # noqa: E402


def store_reads(steps: int, rounds: int = 20) -> tuple[float, float]:
    """(full read s, refresh read s), medians: what the Train page asks of the store."""
    from dlguide_core.jobs.store import JobStore

    store = JobStore()
    job = store.create("cifar_net", "pytorch", {})
    now = time.time()
    for first in range(1, steps + 1, 10_000):
        store.add_steps([(job.id, s, s // 1000, 2.0 / s, 0.1, 50.0, now + s * 0.01, None)
                         for s in range(first, min(first + 10_000, steps + 1))])
    full, refresh = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        cols = store.steps(job.id)
        full.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert store.has_step(job.id, cols["step"][-6], cols["time"][-6])
        store.steps(job.id, after=steps - 5)
        refresh.append(time.perf_counter() - start)
    store.close()
    return statistics.median(full), statistics.median(refresh)


def jobs_list_startup(home: Path, repeat: int = 5) -> tuple[float, float]:
    from bench.bench_cli_startup import measure

    runs = [measure(ROOT, ["jobs", "list", "--json"], home) for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if (reason := unavailable_reason()) is not None:
        raise SystemExit(reason)
    server = PostgresServer().start()
    try:
        backends = {"sqlite": None, "postgresql": server.create_database()}
        home = Path(tempfile.mkdtemp(prefix="bench-store-"))
        os.environ["DLGUIDE_HOME"] = str(home)
        from bench.bench_training import readable_latency, streaming_overhead
        from tests.support.toy_data import write_toy_dataset

        data = write_toy_dataset(home / "toy", classes=10, per_class=40 if args.quick else 100, val_per_class=2)
        reads = {}
        for name, url in backends.items():
            if url:
                os.environ["DLGUIDE_STORE_URL"] = url
            print(f"--- {name}")
            streaming_overhead(data, 2 if args.quick else 6)
            readable_latency(100 if args.quick else 300, 0.02)
            reads[name] = store_reads(100_000)
            print(f"store reads at 100,000 steps: full {reads[name][0] * 1e3:.0f} ms, refresh "
                  f"{reads[name][1] * 1e3:.1f} ms")
            wall, rss = jobs_list_startup(home)
            print(f"`jobs list --json` start-up: {wall:.3f} s, {rss:.0f} MB peak RSS")
        (sf, sr), (pf, pr) = reads["sqlite"], reads["postgresql"]
        print(f"PostgreSQL / SQLite: full read {pf / sf:.2f}x, refresh {pr / sr:.2f}x")
    finally:
        server.close()


if __name__ == "__main__":
    main()
