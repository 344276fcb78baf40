"""What a browser tab watching a running job costs its own machine: chromium's CPU on /train while a job trains.

    .venv/bin/python bench/bench_train_page_browser.py [--windows 3] [--seconds 30] [--warm-s 60]

A server started as `make run` starts it (tests.support.servers.start_served: serve.py, its token), a cifar_net job
started through the CLI on a small generated ImageFolder (2 DataLoader workers, running for the whole bench), and
headless Debian chromium (the tests' flags, a 1400x1000 window) on /train once the job has streamed for `--warm-s`.
Each window reads the CPU time of chromium's processes (psutil, the browser and every child) over `--seconds`; an
idle Classify tab is measured the same way for comparison. Prints one JSON object: percent of one core per window.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import CHROMIUM, CHROMIUM_FLAGS  # noqa: E402 - the tests' browser and flags
from tests.support.servers import start_served  # noqa: E402 - `make run`'s command line, with its token
from tests.support.toy_data import write_toy_dataset  # noqa: E402


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


def watch(browser, url: str, windows: int, seconds: float) -> list[float]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(url)
    page.wait_for_timeout(8000)  # the page drawn, its scripts parsed
    me, shares = psutil.Process(), []
    for _ in range(windows):
        before, start = chromium_cpu(me), time.monotonic()
        page.wait_for_timeout(seconds * 1000)
        shares.append(round(100 * (chromium_cpu(me) - before) / (time.monotonic() - start), 1))
    context.close()
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warm-s", type=float, default=60.0, help="steps streamed before the first window")
    args = parser.parse_args()
    if CHROMIUM is None:
        sys.exit("Debian chromium is needed (apt-get install chromium)")
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
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            watching = watch(browser, served.link("/train"), args.windows, args.seconds)
            idle = watch(browser, served.link("/classify"), args.windows, args.seconds)
            browser.close()
    finally:
        subprocess.run([sys.executable, "-m", "dlguide_core", "jobs", "cancel", job_id], cwd=ROOT, env=env,
                       capture_output=True, check=False)
        served.stop()
    print(json.dumps({"job_id": job_id, "train_page_running_job_pct_core": watching,
                      "classify_page_idle_pct_core": idle, "window_s": args.seconds, "cores": os.cpu_count()}))


if __name__ == "__main__":
    main()
