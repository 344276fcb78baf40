"""What a browser tab watching a running job costs its own machine: chromium's CPU on /train while a job trains.

    .venv/bin/python -m bench.bench_train_page_browser [--windows 3] [--seconds 30] [--warm-s 60]

A server started as `make run` starts it (tests.support.servers.start_served: serve.py, its token), a cifar_net job
started through the CLI on a small generated ImageFolder (2 DataLoader workers, running for the whole bench), and
headless Debian chromium (the tests' flags, a 1400x1000 window) on /train once the job has streamed for `--warm-s`.
Each window reads the CPU time of chromium's processes (psutil, the browser and every child) over `--seconds`; an
idle Classify tab is measured the same way for comparison. Reports percent of one core per window.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench.common import parser, report, result, skip
from tests.support.chromium import CHROMIUM, MISSING, launch
from tests.support.paths import ROOT
from tests.support.servers import start_served  # `make run`'s command line, with its token
from tests.support.toy_data import write_toy_dataset


def chromium_cpu(root: psutil.Process) -> float:
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            if "chrom" in proc.name():
                times = proc.cpu_times()
                total += times.user + times.system
        except psutil.Error:
            continue
    return total


def watch(browser, url: str, windows: int, seconds: float, drawn_s: float = 8.0) -> list[float]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(url)
    page.wait_for_timeout(drawn_s * 1000)  # the page drawn, its scripts parsed
    me, shares = psutil.Process(), []
    for _ in range(windows):
        before, start = chromium_cpu(me), time.monotonic()
        page.wait_for_timeout(seconds * 1000)
        shares.append(round(100 * (chromium_cpu(me) - before) / (time.monotonic() - start), 1))
    context.close()
    return shares


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--windows", type=int, default=3)
    options.add_argument("--seconds", type=float, default=30.0)
    options.add_argument("--warm-s", type=float, default=60.0, help="steps streamed before the first window")
    args = options.parse_args()
    if CHROMIUM is None:
        skip(MISSING)
    drawn_s = 8.0  # a page's time to be drawn before its window
    if args.quick:  # one 1 s window each, 2 s after the page opened, 1 s after the server's start
        args.windows, args.seconds, args.warm_s, drawn_s = 1, 1.0, 1.0, 2.0
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="bench_train_browser_"))
    env = {**os.environ, "DLGUIDE_HOME": str(work / "home"), "DLGUIDE_OFFLINE": "1"}
    data = write_toy_dataset(work / "home" / "data" / "toy", per_class=64, size=32)
    job = subprocess.run([sys.executable, "-m", "dlguide_core", "train", "--recipe", "cifar_net", "--data", str(data),
                          "--epochs", "1000", "--workers", "2", "--detach", "--json"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    job_id = json.loads(job.stdout.strip().splitlines()[-1])["job_id"]
    served = start_served(work / "server.log", {"DLGUIDE_HOME": env["DLGUIDE_HOME"], "DLGUIDE_OFFLINE": "1"})
    try:
        time.sleep(args.warm_s)
        with sync_playwright() as pw:
            browser = launch(pw.chromium)
            watching = watch(browser, served.link("/train"), args.windows, args.seconds, drawn_s)
            idle = watch(browser, served.link("/classify"), args.windows, args.seconds, drawn_s)
            browser.close()
    finally:
        subprocess.run([sys.executable, "-m", "dlguide_core", "jobs", "cancel", job_id], cwd=ROOT, env=env,
                       capture_output=True, check=False)
        served.stop()
    report(result("bench_train_page_browser", {
        "job_id": job_id, "train_page_running_job_pct_core": watching, "classify_page_idle_pct_core": idle,
        "window_s": args.seconds, "cores": os.cpu_count()}), args.json)


if __name__ == "__main__":
    main()
