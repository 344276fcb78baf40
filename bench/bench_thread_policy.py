"""Eager PyTorch batch-1 latency, quiet and with a training job on the host, under each thread policy, one run.

    .venv/bin/python -m bench.bench_thread_policy --data DIR [--policies off,default] [--rounds 3] [--iters 15]

A policy is the environment both processes start with: "off" sets DLGUIDE_THREAD_POLICY=off (dlguide decides
nothing: the runtimes' own defaults, i.e. dlguide before dlguide_core.threads), "default" leaves dlguide's
declaration in charge (dlguide_core.threads: OMP_WAIT_POLICY=PASSIVE), any other word is OMP_WAIT_POLICY.

One timing process per policy is started once (`threads.declare("bench")`, as `python -m dlguide_core bench`
does, then eager Inception v3, untrained weights: latency does not depend on them) and asked for `--iters`
timed forwards at batch 1 (after 2 untimed) whenever a row is measured. Each round times every policy quiet,
then, per policy, starts `python -m dlguide_core train --recipe inception_v3 --workers 1` on DIR (a prepared
tiny-imagenet folder) with that policy's environment, waits `--settle` s and times it again, and stops the job.
Rounds interleave the policies, so load from other users of the machine falls on all of them alike. Each row
gives the load average before it. Prints Markdown; the ratio is loaded p50 over the same policy's quiet p50 of
that round.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import parser, report, result
from tests.support.paths import ROOT
from tests.support.toy_data import write_toy_dataset

TIMER = """
import sys, time
from dlguide_core import threads
threads.declare("bench")
import torch
from dlguide_core.inference.backend_base import sample_batch
from dlguide_core.vision.models import load_model
loaded = load_model("none")
batch = sample_batch(loaded, 1)
print("ready", torch.get_num_threads(), flush=True)
for line in sys.stdin:
    iters = int(line)
    with torch.inference_mode():
        for _ in range(2):
            loaded.model(batch)
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            loaded.model(batch)
            times.append((time.perf_counter() - start) * 1000)
    print(" ".join(f"{t:.2f}" for t in times), flush=True)
"""


def policy_env(policy: str, home: str) -> dict[str, str]:
    drop = {"OMP_WAIT_POLICY", "OMP_NUM_THREADS", "DLGUIDE_THREAD_POLICY", "DLGUIDE_THREADS_DECIDED"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update({"DLGUIDE_HOME": home, "PYTHONPATH": str(ROOT)})
    if policy == "off":
        env["DLGUIDE_THREAD_POLICY"] = "off"
    elif policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    return env


class Timer:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", TIMER], env=env, cwd=ROOT, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.threads = self.proc.stdout.readline().split()[1]  # type: ignore[union-attr]

    def p50(self, iters: int) -> float:
        self.proc.stdin.write(f"{iters}\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return statistics.median(float(t) for t in self.proc.stdout.readline().split())  # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(timeout=60)


def start_training(env: dict[str, str], data: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dlguide_core", "train", "--recipe", "inception_v3", "--data", data,
                             "--weights", "none", "--workers", "1", "--batch-size", "16", "--epochs", "50"],
                            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a measurement's load, not a run to keep: no checkpoint wanted
    except ProcessLookupError:
        pass  # it ended on its own (main() says so)
    proc.wait(timeout=60)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--data", help="a prepared tiny-imagenet folder (prepare tiny-imagenet DIR); required but "
                                        "for --quick, which trains on a toy folder")
    options.add_argument("--policies", default="off,default", help="comma-separated: off, default, PASSIVE, ACTIVE")
    options.add_argument("--rounds", type=int, default=3)
    options.add_argument("--iters", type=int, default=15)
    options.add_argument("--settle", type=float, default=30.0, help="seconds between starting the job and timing")
    args = options.parse_args()
    if args.quick:  # dlguide's policy, one round of 2 forwards, 2 s after the job's start, on a toy folder
        args.policies, args.rounds, args.iters, args.settle = "default", 1, 2, 2.0
        args.data = args.data or str(write_toy_dataset(Path(tempfile.mkdtemp(prefix="bench-toy-")) / "toy"))
    elif not args.data:
        options.error("--data is required (a prepared tiny-imagenet folder)")
    rows: list[dict[str, object]] = []
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"`{' '.join(sys.argv)}`\n")
    print("| round | policy | torch threads | host | eager batch-1 p50 ms | x quiet | load average before |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as home:
        envs = {p: policy_env(p, home) for p in policies}
        timers = {p: Timer(envs[p]) for p in policies}
        try:
            for rnd in range(1, args.rounds + 1):
                quiet = {}
                for p in policies:
                    before = load()
                    quiet[p] = timers[p].p50(args.iters)
                    print(f"| {rnd} | {p} | {timers[p].threads} | quiet | {quiet[p]:.0f} | 1.0 | {before} |",
                          flush=True)
                    rows.append({"round": rnd, "policy": p, "host": "quiet", "p50_ms": quiet[p]})
                for p in policies:
                    job = start_training(envs[p], args.data)
                    try:
                        time.sleep(args.settle)
                        before = load()
                        busy = timers[p].p50(args.iters)
                        if job.poll() is not None:  # a job that failed at once (data not prepared) is no load
                            raise SystemExit(f"the training job ended (exit {job.returncode}) before the timing did: "
                                             f"run it by hand to see why (is {args.data} prepared?)")
                    finally:
                        stop(job)
                    print(f"| {rnd} | {p} | {timers[p].threads} | 1 training job | {busy:.0f} | "
                          f"{busy / quiet[p]:.1f} | {before} |", flush=True)
                    rows.append({"round": rnd, "policy": p, "host": "1 training job", "p50_ms": busy})
        finally:
            for timer in timers.values():
                timer.close()
    report(result("bench_thread_policy", {"rows": rows}), args.json)


if __name__ == "__main__":
    main()
