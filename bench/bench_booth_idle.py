"""What open, idle booth tabs cost the server (issue 30 point 2: <= 1 % of a core per tab), in headless Debian
chromium against a booth started as `make kiosk` starts it (serve.command, DLGUIDE_KIOSK=1):

- N tabs on the attract view (a phone left open on the booth), for N = 0, 1, 5, 20;
- one tab showing a visitor's answer (until its idle reset, which the browser does alone).

The server's CPU (every process of it) is measured over --idle seconds once every tab shows its screen.
With --training, a real training job runs on the same host the whole time (cifar_net, DataLoader workers, started
with the CLI into the booth's own DLGUIDE_HOME, as a booth beside a lab's run): every tab then shows its live loss
ticker, redrawn every 5 s; the job's steps over each row say it kept training.

    .venv/bin/python bench/bench_booth_idle.py [--idle 60] [--tabs 0 1 5 20] [--backend torch] [--training]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_first_visit import weights_env  # noqa: E402
from bench_kiosk_load import UPLOAD_TAB, server_cpu_s, shot, stop_server  # noqa: E402
from bench_train_page_idle import CHROMIUM_FLAGS, stop_jobs, write_image_folder  # noqa: E402

import serve  # noqa: E402 - the launcher, imported from the project root

ATTRACT = "Show the camera something"
TICKER = "how wrong the model still is"  # the booth's loss ticker, once a running job has steps


def start_training(home: Path, env: dict[str, str]) -> str:
    """A cifar_net job on a toy ImageFolder in the booth's data root, detached, long enough to outlast the bench
    (2 DataLoader workers); its id."""
    write_image_folder(home / "data" / "toy", classes=4, per_class=64)
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


def idle_share(url: str, pid: int, tabs: int, idle_s: float, chromium: str, *, with_photo: bool = False,
               workdir: Path, ticker: bool = False) -> float:
    """The server's CPU share of one core over `idle_s` with `tabs` open tabs (attract view, or an answer); with
    `ticker`, each tab first shows the running job's loss ticker."""
    from playwright.sync_api import sync_playwright

    server = psutil.Process(pid)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
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
        time.sleep(3)  # the last tab's own runs end
        start_cpu, start = server_cpu_s(server), time.perf_counter()
        time.sleep(idle_s)
        share = (server_cpu_s(server) - start_cpu) / (time.perf_counter() - start)
        browser.close()
    return share


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, default=60.0, help="seconds measured per row")
    parser.add_argument("--tabs", type=int, nargs="+", default=[0, 1, 5, 20])
    parser.add_argument("--backend", default="torch",
                        help="DLGUIDE_KIOSK_BACKEND (idle tabs run no model: eager PyTorch skips the ONNX export)")
    parser.add_argument("--training", action="store_true",
                        help="a real training job runs on the host throughout; every tab shows its loss ticker")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("Debian chromium is needed (apt-get install chromium)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rows = []
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "DLGUIDE_KIOSK": "1", "DLGUIDE_HOME": home, "DLGUIDE_OFFLINE": "1",
               "DLGUIDE_KIOSK_BACKEND": args.backend, "MALLOC_ARENA_MAX": "2", "STREAMLIT_SERVER_ADDRESS": "127.0.0.1",
               **weights_env(Path(home))}
        proc = subprocess.Popen(serve.command(port), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT)
        job_id = None
        try:
            url = f"http://127.0.0.1:{port}"
            serve.wait_healthy(url, proc, timeout=1800)
            if args.training:
                job_id = start_training(Path(home), env)
            screens = [(tabs, False) for tabs in args.tabs] + [(1, True)]
            for tabs, with_photo in screens:
                steps_before = job_steps(Path(home), job_id) if job_id else None
                share = idle_share(url, proc.pid, tabs, args.idle, chromium, with_photo=with_photo,
                                   workdir=Path(home), ticker=bool(job_id))
                screen = "an answer, until the idle reset" if with_photo else "attract view"
                rows.append({"tabs": tabs, "screen": screen, "server_cpu_share_of_a_core": round(share, 4),
                             "loadavg_1min": os.getloadavg()[0]})
                if job_id:
                    rows[-1]["training_steps_meanwhile"] = job_steps(Path(home), job_id) - (steps_before or 0)
                print(json.dumps(rows[-1]), flush=True)
        finally:
            stop_server(proc)
            if job_id:
                stop_jobs(Path(home))
    return 0


if __name__ == "__main__":
    sys.exit(main())
