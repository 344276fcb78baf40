"""Resident memory of the served app: idle, then with the model loaded after one classification.

Starts the app as `make run` does (serve.py) on a loopback port, drives one upload through headless
Debian chromium (Playwright), and reads the server's RSS with psutil.

    .venv/bin/python bench/bench_app_memory.py [--weights none|imagenet]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import psutil
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "dlguide_core" / "samples" / "chelsea.jpg"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(proc: psutil.Process) -> float:
    return round(sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", default="none")
    args = parser.parse_args()
    port = free_port()
    sys.path.insert(0, str(ROOT))
    import serve  # the launcher: `make run`'s command line, only the port differs

    server = subprocess.Popen(serve.command(port), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "STREAMLIT_SERVER_ADDRESS": "127.0.0.1"})
    url = f"http://127.0.0.1:{port}"
    try:
        serve.wait_healthy(url, server, timeout=300)
        proc = psutil.Process(server.pid)
        idle = rss_mib(proc)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
            page = browser.new_page()
            page.set_default_timeout(180_000)
            page.goto(url)
            if args.weights != "imagenet":
                page.get_by_test_id("stSelectbox").first.click()
                page.get_by_role("option", name="none (untrained, random init)").click()
            page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(SAMPLE))
            page.locator('[data-testid="stPlotlyChart"]').first.wait_for()
            loaded = rss_mib(proc)
            browser.close()
        print(json.dumps({"weights": args.weights, "rss_idle_mib": idle, "rss_model_loaded_mib": loaded}, indent=2))
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
