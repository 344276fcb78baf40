"""What a server's start costs, this checkout against another: seconds to its health check, its CPU seconds and
its RSS once ready, for the full app (`make run`) and the booth (`make kiosk`), alternating between the two trees.

    .venv/bin/python -m bench.bench_server_start --before /tmp/before [--runs 3] [--booth-home DIR]

`--before` is another checkout of the project (`git worktree add --detach /tmp/before COMMIT`), served with this
checkout's Python. The booth needs its ImageNet weights or a stand-in (tests.support.standin_weights, the same shape)
and starts on `--booth-home`, a DLGUIDE_HOME whose exports and compiled programs are already there (a restarted
booth: it loads and ranks its backends, it does not export); a fresh one is made by a first, untimed start. The
server's CPU and RSS are read from /proc the moment it answers its health check; the launcher's own wait counts.
Prints the result record (bench/common.py).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import serve
from bench.common import parser, report, result
from tests.support.accounting import cpu_s, rss_mib
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.servers import stop_process
from tests.support.standin_weights import weights_env


def start_once(tree: Path, env: dict[str, str], log: Path) -> dict:
    port = free_port()
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(tree / "serve.py"), "--server.port", str(port)], cwd=tree,
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        serve.wait_healthy(f"http://127.0.0.1:{port}", proc, timeout=600,
                           log_tail=lambda: log.read_text(errors="replace")[-1500:])
        ready = time.monotonic() - started
        cpu, rss = cpu_s(proc.pid, children=False), rss_mib(proc.pid, children=False)
        return {"ready_s": round(ready, 2), "cpu_s": round(cpu, 2), "rss_mib": round(rss)}
    finally:
        stop_process(proc)


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--before", type=Path, default=None,
                      help="another checkout of the project (required, but for --quick: this one alone)")
    args.add_argument("--runs", type=int, default=3)
    args.add_argument("--booth-home", type=Path, default=None, help="a prepared booth's DLGUIDE_HOME")
    ns = args.parse_args()
    if ns.before is None and not ns.quick:
        args.error("--before is required (another checkout of the project)")
    work = Path(tempfile.mkdtemp(prefix="bench_server_start_"))
    base = {**os.environ, **weights_env(work), "STREAMLIT_SERVER_ADDRESS": "127.0.0.1", "DLGUIDE_OFFLINE": "1"}
    booth_home = ns.booth_home or work / "booth-home"
    kinds = {"app": {**base, "DLGUIDE_HOME": str(work / "app-home")},
             "booth": {**base, "DLGUIDE_KIOSK": "1", "MALLOC_ARENA_MAX": "2", "DLGUIDE_HOME": str(booth_home)}}
    if ns.quick:  # the full app started once, this checkout only (the booth's first start exports: minutes)
        ns.runs = 1
        del kinds["booth"]
    elif ns.booth_home is None:  # the exports and compiled programs, made once, untimed
        start_once(ROOT, kinds["booth"], work / "prepare.log")
    trees = {"this": ROOT} if ns.before is None else {"this": ROOT, "before": ns.before.resolve()}
    rows: dict[str, dict[str, list[dict]]] = {k: {t: [] for t in trees} for k in kinds}
    for run in range(ns.runs):
        for kind, env in kinds.items():
            for name in (list(trees) if run % 2 else list(reversed(trees))):
                rows[kind][name].append(start_once(trees[name], env, work / f"{kind}-{name}-{run}.log"))
    medians = {kind: {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
                      for name, runs in by_tree.items()} for kind, by_tree in rows.items()}
    report(result("bench_server_start", {"runs": rows, "medians": medians, "cores": os.cpu_count()}), ns.json)


if __name__ == "__main__":
    main()
