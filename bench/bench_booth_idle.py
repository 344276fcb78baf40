"""What open, idle booth tabs cost the server (issue 30 point 2: <= 1 % of a core per tab), in headless Debian
chromium against a booth started as `make kiosk` starts it (serve.command, DLGUIDE_KIOSK=1):

- N tabs on the attract view (a phone left open on the booth), for N = 0, 1, 5, 20;
- one tab showing a visitor's answer (its idle check runs until the idle reset).

The server's CPU (every process of it) is measured over --idle seconds once every tab shows its screen.

    .venv/bin/python bench/bench_booth_idle.py [--idle 60] [--tabs 0 1 5 20] [--backend torch]
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
from bench_kiosk_load import UPLOAD_TAB, server_cpu_s, shot  # noqa: E402
from bench_train_page_idle import CHROMIUM_FLAGS  # noqa: E402

import serve  # noqa: E402 - the launcher, imported from the project root

ATTRACT = "Show the camera something"


def idle_share(url: str, pid: int, tabs: int, idle_s: float, chromium: str, *, with_photo: bool = False,
               workdir: Path) -> float:
    """The server's CPU share of one core over `idle_s` with `tabs` open tabs (attract view, or an answer)."""
    from playwright.sync_api import sync_playwright

    server = psutil.Process(pid)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        pages = []
        for _ in range(tabs):
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.goto(url)
            page.get_by_text(ATTRACT).wait_for(timeout=300_000)
            if with_photo:
                photo = workdir / "visitor.jpg"
                photo.write_bytes(shot(7))
                page.locator(UPLOAD_TAB.format(0)).filter(has_text="Upload").click()
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
        try:
            url = f"http://127.0.0.1:{port}"
            serve.wait_healthy(url, proc, timeout=1800)
            for tabs in args.tabs:
                share = idle_share(url, proc.pid, tabs, args.idle, chromium, workdir=Path(home))
                rows.append({"tabs": tabs, "screen": "attract view", "server_cpu_share_of_a_core": round(share, 4),
                             "loadavg_1min": os.getloadavg()[0]})
                print(json.dumps(rows[-1]), flush=True)
            share = idle_share(url, proc.pid, 1, args.idle, chromium, with_photo=True, workdir=Path(home))
            rows.append({"tabs": 1, "screen": "an answer, until the idle reset",
                         "server_cpu_share_of_a_core": round(share, 4), "loadavg_1min": os.getloadavg()[0]})
            print(json.dumps(rows[-1]), flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
