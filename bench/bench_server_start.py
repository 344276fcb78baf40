"""What a server's start costs, this checkout against another: seconds to its health check, its CPU seconds and
its RSS once ready, for the full app (`make run`) and the booth (`make kiosk`), alternating between the two trees.

    .venv/bin/python bench/bench_server_start.py --before /tmp/before [--runs 3] [--booth-home DIR]

`--before` is another checkout of the project (`git worktree add --detach /tmp/before COMMIT`), served with this
checkout's Python. The booth needs its ImageNet weights or a stand-in (tests.support.standin_weights, the same shape)
and starts on `--booth-home`, a DLGUIDE_HOME whose exports and compiled programs are already there (a restarted
booth: it loads and ranks its backends, it does not export); a fresh one is made by a first, untimed start. The
server's CPU and RSS are read from /proc the moment it answers its health check; the launcher's own wait counts.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from bench_first_visit import free_port, weights_env  # noqa: E402
from bench_kiosk_load import stop_server  # noqa: E402

import serve  # noqa: E402 - the launcher's health wait


def _proc_figures(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS MiB) of `pid` now."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14 and 15 of stat)
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:")) / 1024
    return cpu, rss


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
        cpu, rss = _proc_figures(proc.pid)
        return {"ready_s": round(ready, 2), "cpu_s": round(cpu, 2), "rss_mib": round(rss)}
    finally:
        stop_server(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="another checkout of the project")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--booth-home", type=Path, default=None, help="a prepared booth's DLGUIDE_HOME")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_server_start_"))
    base = {**os.environ, **weights_env(work), "STREAMLIT_SERVER_ADDRESS": "127.0.0.1", "DLGUIDE_OFFLINE": "1"}
    booth_home = args.booth_home or work / "booth-home"
    kinds = {"app": {**base, "DLGUIDE_HOME": str(work / "app-home")},
             "booth": {**base, "DLGUIDE_KIOSK": "1", "MALLOC_ARENA_MAX": "2", "DLGUIDE_HOME": str(booth_home)}}
    if args.booth_home is None:  # the exports and compiled programs, made once, untimed
        start_once(ROOT, kinds["booth"], work / "prepare.log")
    trees = {"this": ROOT, "before": args.before.resolve()}
    rows: dict[str, dict[str, list[dict]]] = {k: {t: [] for t in trees} for k in kinds}
    for run in range(args.runs):
        for kind, env in kinds.items():
            for name in (("this", "before") if run % 2 else ("before", "this")):
                rows[kind][name].append(start_once(trees[name], env, work / f"{kind}-{name}-{run}.log"))
    medians = {kind: {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]}
                      for name, runs in by_tree.items()} for kind, by_tree in rows.items()}
    print(json.dumps({"runs": rows, "medians": medians, "cores": os.cpu_count()}, indent=1))


if __name__ == "__main__":
    main()
