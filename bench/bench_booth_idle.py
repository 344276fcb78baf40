"""What open, idle booth tabs cost the server (issue 30 point 2: <= 1 % of a core per tab), in headless Debian
chromium against a booth started as `make kiosk` starts it (serve.command, DLGUIDE_KIOSK=1):

- N tabs on the attract view (a phone left open on the booth), for N = 0, 1, 5, 20;
- one tab showing a visitor's answer (until its idle reset, which the browser does alone).

The server's CPU (every process of it) is measured over --idle seconds once every tab shows its screen.
With --training, a real training job runs on the same host the whole time (cifar_net, DataLoader workers, started
with the CLI into the booth's own DLGUIDE_HOME, as a booth beside a lab's run): every tab then shows its live loss
ticker, redrawn every 5 s; the job's steps over each row say it kept training.

    .venv/bin/python -m bench.bench_booth_idle [--idle 60] [--tabs 0 1 5 20] [--backend torch] [--training]
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
from tests.support.accounting import cpu_s
from tests.support.chromium import CHROMIUM, MISSING, launch
from tests.support.jobs import cancel_active
from tests.support.paths import ROOT
from tests.support.servers import start_served
from tests.support.standin_weights import weights_env
from tests.support.toy_data import write_toy_dataset
from tests.support.visitors import UPLOAD_TAB, shot

ATTRACT = "Show the camera something"
TICKER = "how wrong the model still is"  # the booth's loss ticker, once a running job has steps


def start_training(home: Path, env: dict[str, str]) -> str:
    """A cifar_net job on a toy ImageFolder in the booth's data root, detached, long enough to outlast the bench
    (2 DataLoader workers); its id."""
    write_toy_dataset(home / "data" / "toy", classes=4, per_class=64)
    done = subprocess.run([sys.executable, "-m", "dlguide_core", "train", "--recipe", "cifar_net", "--data",
                           str(home / "data" / "toy"), "--epochs", "10000", "--batch-size", "8", "--workers", "2",
                           "--detach", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"the training job did not start: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)["job_id"]


def job_steps(home: Path, job_id: str) -> int:
    from dlguide_core.jobs.store import JobStore

    store = JobStore(home / "jobs.db")
    try:
        return len(store.steps(job_id, extras=False)["step"])
    finally:
        store.close()


def idle_share(url: str, pid: int, tabs: int, idle_s: float, *, with_photo: bool = False,
               workdir: Path, ticker: bool = False, calm_s: float = 3.0) -> float:
    """The server's CPU share of one core over `idle_s` with `tabs` open tabs (attract view, or an answer); with
    `ticker`, each tab first shows the running job's loss ticker."""
    from playwright.sync_api import sync_playwright

    server = psutil.Process(pid)
    with sync_playwright() as pw:
        browser = launch(pw.chromium)
        pages = []
        for _ in range(tabs):
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.goto(url)
            page.get_by_text(ATTRACT).wait_for(timeout=300_000)
            if ticker:
                page.get_by_text(TICKER).wait_for(timeout=300_000)
            if with_photo:
                photo = workdir / "visitor.jpg"
                photo.write_bytes(shot(7))
                page.locator(UPLOAD_TAB).click()
                page.locator("input[type=file]").set_input_files(str(photo))
                page.get_by_text("I think it's a").wait_for(timeout=300_000)
            pages.append(page)
        time.sleep(calm_s)  # the last tab's own runs end
        start_cpu, start = cpu_s(server), time.perf_counter()
        time.sleep(idle_s)
        share = (cpu_s(server) - start_cpu) / (time.perf_counter() - start)
        browser.close()
    return share


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--idle", type=float, default=60.0, help="seconds measured per row")
    args.add_argument("--tabs", type=int, nargs="+", default=[0, 1, 5, 20])
    args.add_argument("--backend", default="torch",
                      help="DLGUIDE_KIOSK_BACKEND (idle tabs run no model: eager PyTorch skips the ONNX export)")
    args.add_argument("--training", action="store_true",
                      help="a real training job runs on the host throughout; every tab shows its loss ticker")
    ns = args.parse_args()
    if CHROMIUM is None:
        skip(MISSING)
    if ns.quick:  # one tab, 1 s per row after 1 s of calm
        ns.idle, ns.tabs = 1.0, [1]
    rows = []
    with tempfile.TemporaryDirectory() as home:
        env = {"DLGUIDE_KIOSK": "1", "DLGUIDE_HOME": home, "DLGUIDE_OFFLINE": "1",
               "DLGUIDE_KIOSK_BACKEND": ns.backend, "MALLOC_ARENA_MAX": "2", **weights_env(Path(home))}
        server = start_served(Path(home) / "server.log", env, timeout=1800)
        job_id = None
        try:
            if ns.training:
                job_id = start_training(Path(home), {**os.environ, **env})
            screens = [(tabs, False) for tabs in ns.tabs] + [(1, True)]
            for tabs, with_photo in screens:
                steps_before = job_steps(Path(home), job_id) if job_id else None
                share = idle_share(server.url, server.proc.pid, tabs, ns.idle, with_photo=with_photo,
                                   workdir=Path(home), ticker=bool(job_id), calm_s=1.0 if ns.quick else 3.0)
                screen = "an answer, until the idle reset" if with_photo else "attract view"
                rows.append({"tabs": tabs, "screen": screen, "server_cpu_share_of_a_core": round(share, 4),
                             "loadavg_1min": os.getloadavg()[0]})
                if job_id:
                    rows[-1]["training_steps_meanwhile"] = job_steps(Path(home), job_id) - (steps_before or 0)
                print(json.dumps(rows[-1]), flush=True)
        finally:
            server.stop()
            if job_id:
                cancel_active(Path(home))
    report(result("bench_booth_idle", {"idle_s": ns.idle, "rows": rows}), ns.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
