"""Resident memory of the served app: idle, with the model loaded, and under a stream of huge-image uploads.

Starts the app as `make run` (or `make kiosk`) does (serve.py) on a loopback port, drives uploads through headless
Debian chromium (Playwright), and reads the server's RSS (with its children) with psutil.

    .venv/bin/python bench/bench_app_memory.py [--weights none|imagenet]               # one upload
    .venv/bin/python bench/bench_app_memory.py --uploads 20 --sessions 4 [--booth]      # issue 18
    .venv/bin/python bench/bench_app_memory.py --uploads 20 --sessions 4 --max-forwards 64   # forwards ungated

With --uploads, each upload is a PNG of 11000x9000 RGBA (a ~400 KB file that decodes to 400 MB; the default
pixel limit refuses it before decoding) or, alternately, the largest RGBA PNG the default limit accepts
(8000x6200, 49.6 MP: 198 MB decoded, reduced to the model's size at once). The sessions run in parallel
threads, after one ordinary visit has loaded the model (the booth loads it before its port opens); RSS is
sampled every 0.2 s (peak), read after the last upload and 10 s after the tabs close.
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
import threading
import time
from pathlib import Path

import psutil
from PIL import Image
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "dlguide_core" / "samples" / "chelsea.jpg"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
BOMB_SIZE, LARGEST_SIZE = (11000, 9000), (8000, 6200)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mib(proc: psutil.Process) -> float:
    return round(sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20, 1)


def big_png(path: Path, size: tuple[int, int]) -> Path:
    """A mostly transparent RGBA PNG with a coloured band: a few hundred KB on disk, 4 bytes a pixel decoded."""
    img = Image.new("RGBA", size, (0, 0, 0, 0))
    img.paste((200, 120, 40, 255), (0, size[1] // 3, size[0], size[1] // 2))
    img.save(path, optimize=False, compress_level=9)
    return path


def one_upload(url: str, weights: str) -> dict:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
        page = browser.new_page()
        page.set_default_timeout(600_000)
        page.goto(url)
        if weights != "imagenet":
            page.get_by_test_id("stSelectbox").first.click()
            page.get_by_role("option", name="none (untrained, random init)").click()
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(SAMPLE))
        page.locator('[data-testid="stPlotlyChart"]').first.wait_for()
        browser.close()
    return {}


def visitor(browser, url: str, args: argparse.Namespace, files: list[Path], errors: list[str]) -> None:
    """One session: uploads `files` one after another, each time waiting for its answer (result or error)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(args.step_timeout_s * 1000)
    booth = args.booth
    step = "open"
    seen: list[str] = []  # what the page said before a failure: crashes, errors, closed sockets
    page.on("crash", lambda _: seen.append("page crashed"))
    page.on("pageerror", lambda exc: seen.append(f"page error: {exc}"[:300]))
    page.on("console", lambda msg: seen.append(f"console {msg.type}: {msg.text}"[:300]) if msg.type in (
        "error", "warning") else None)
    page.on("websocket", lambda ws: ws.on("close", lambda _: seen.append("websocket closed")))
    try:
        page.goto(url)  # booth mode serves the booth alone, at /
        if not booth and args.weights != "imagenet":
            page.get_by_test_id("stSelectbox").first.click()
            page.get_by_role("option", name="none (untrained, random init)").click()
        for i, path in enumerate(files):
            if booth:
                from bench_kiosk_load import ATTRACT, PHOTO_INPUT, START_OVER, UPLOAD_TAB  # this script's folder

                step = f"upload {i}: choose Upload"
                page.locator(UPLOAD_TAB).click()
                step = f"upload {i}: send the file"
                page.locator(PHOTO_INPUT).set_input_files(str(path))
                step = f"upload {i}: wait for the answer"
                page.get_by_text("I think it's a").or_(page.get_by_text("too large")).first.wait_for()
                step = f"upload {i}: start over"
                if page.locator(START_OVER).is_visible():  # a refused photo leaves the attract view as it was
                    page.locator(START_OVER).click()
                page.get_by_text(ATTRACT).wait_for()
            else:
                page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
                answers = page.locator('[data-testid="stPlotlyChart"], [data-testid="stAlertContentError"]')
                answers.nth(i).wait_for()
    except Exception as exc:  # noqa: BLE001 - reported in the JSON, the other sessions go on
        said = list(dict.fromkeys(seen))[-6:]
        errors.append(f"{step}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}; the page said: {said}")
        page.screenshot(path=str(Path(tempfile.gettempdir()) / f"bench-memory-{threading.get_ident()}.png"))
    finally:
        context.close()


def upload_stream(url: str, proc: psutil.Process, args: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix="dlguide-mem-"))
    bomb, largest = big_png(work / "bomb.png", BOMB_SIZE), big_png(work / "largest.png", LARGEST_SIZE)
    png_kib = {"bomb": round(bomb.stat().st_size / 1024), "largest": round(largest.stat().st_size / 1024)}
    per_session = args.uploads // args.sessions
    plans = [[shutil.copyfile(bomb if (s + i) % 2 == 0 else largest, work / f"s{s}-{i}.png")
              for i in range(per_session)] for s in range(args.sessions)]
    peak, stop = [0.0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mib(proc))
            time.sleep(0.2)

    errors: list[str] = []
    if not args.booth:  # one ordinary visit first: the model loaded, as on a server that has had visitors
        one_upload(url, args.weights)
    before = rss_mib(proc)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    # Playwright's sync API is per thread: each session thread drives its own browser instance.
    threads = [threading.Thread(target=_session_thread, args=(url, args, plan, errors)) for plan in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = rss_mib(proc)
    time.sleep(10)
    stop.set()
    closed = rss_mib(proc)
    shutil.rmtree(work, ignore_errors=True)
    return {"uploads": per_session * args.sessions, "sessions": args.sessions, "seconds": round(
        time.perf_counter() - start, 1), "rss_before_mib": before, "rss_peak_mib": peak[0],
        "rss_after_uploads_mib": after, "rss_10s_after_tabs_closed_mib": closed, "errors": errors,
        "png_kib": png_kib}


def _session_thread(url: str, args: argparse.Namespace, files: list[Path], errors: list[str]) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
        try:
            visitor(browser, url, args, files, errors)
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", default="none")
    parser.add_argument("--uploads", type=int, default=0, help="huge-PNG uploads in all (issue 18: 20)")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--step-timeout-s", type=int, default=600, help="give up on a session's step after this")
    parser.add_argument("--server-log", type=Path, help="write the server's output here")
    parser.add_argument("--booth", action="store_true", help="serve the booth (make kiosk) instead of the full app")
    parser.add_argument("--max-forwards", type=int, default=None,
                        help="the server's DLGUIDE_MAX_FORWARDS (default: inherited, else the app's default 1)")
    args = parser.parse_args()
    port = free_port()
    sys.path.insert(0, str(ROOT))
    import serve  # the launcher: `make run`'s command line, only the port differs
    from web.token_gate import TOKEN_ENV, entry_url, new_token

    env = {**os.environ, "STREAMLIT_SERVER_ADDRESS": "127.0.0.1", TOKEN_ENV: new_token()}
    if args.booth:
        env["DLGUIDE_KIOSK"] = "1"
    if args.max_forwards is not None:
        env["DLGUIDE_MAX_FORWARDS"] = str(args.max_forwards)
    log = open(args.server_log, "wb") if args.server_log else subprocess.DEVNULL  # noqa: SIM115 - closed at exit
    server = subprocess.Popen(serve.command(port), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    url = base if args.booth else entry_url(base, env[TOKEN_ENV])  # the full app opens with its token (issue 33)
    try:
        serve.wait_healthy(base, server, timeout=600)
        proc = psutil.Process(server.pid)
        idle = rss_mib(proc)
        if args.uploads:
            result = {"mode": "booth" if args.booth else "app", "max_forwards": env.get("DLGUIDE_MAX_FORWARDS", "1"),
                      "rss_idle_mib": idle,
                      **upload_stream(url, proc, args)}
        else:
            one_upload(url, args.weights)
            result = {"weights": args.weights, "rss_idle_mib": idle, "rss_model_loaded_mib": rss_mib(proc)}
        print(json.dumps(result, indent=2))
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
