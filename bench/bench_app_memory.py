"""Resident memory of the served app: idle, with the model loaded, and under a stream of huge-image uploads.

Starts the app as `make run` (or `make kiosk`) does (serve.py) on a loopback port, drives uploads through headless
Debian chromium (Playwright), and reads the server's RSS (with its children) with psutil.

    .venv/bin/python -m bench.bench_app_memory [--weights none|imagenet]               # one upload
    .venv/bin/python -m bench.bench_app_memory --uploads 20 --sessions 4 [--booth]      # issue 18
    .venv/bin/python -m bench.bench_app_memory --uploads 20 --sessions 4 --max-forwards 64   # forwards ungated

With --uploads, each upload is a PNG of 11000x9000 RGBA (a ~400 KB file that decodes to 400 MB; the default
pixel limit refuses it before decoding) or, alternately, the largest RGBA PNG the default limit accepts
(8000x6200, 49.6 MP: 198 MB decoded, reduced to the model's size at once). The sessions run in parallel
threads, after one ordinary visit has loaded the model (the booth loads it before its port opens); RSS is
sampled every 0.2 s (peak), read after the last upload and 10 s after the tabs close.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psutil
from PIL import Image
from playwright.sync_api import sync_playwright

from bench.common import parser, report, result, skip
from tests.support.accounting import rss_mib as tree_rss_mib
from tests.support.chromium import CHROMIUM, MISSING, launch
from tests.support.paths import BUNDLED_SAMPLE as SAMPLE
from tests.support.servers import start_served
from tests.support.visitors import ATTRACT, PHOTO_INPUT, START_OVER, UPLOAD_TAB

BOMB_SIZE, LARGEST_SIZE = (11000, 9000), (8000, 6200)


def rss_mib(proc: psutil.Process) -> float:
    return round(tree_rss_mib(proc), 1)


def big_png(path: Path, size: tuple[int, int]) -> Path:
    """A mostly transparent RGBA PNG with a coloured band: a few hundred KB on disk, 4 bytes a pixel decoded."""
    img = Image.new("RGBA", size, (0, 0, 0, 0))
    img.paste((200, 120, 40, 255), (0, size[1] // 3, size[0], size[1] // 2))
    img.save(path, optimize=False, compress_level=9)
    return path


def one_upload(url: str, weights: str) -> dict:
    with sync_playwright() as pw:
        browser = launch(pw.chromium)
        page = browser.new_page()
        page.set_default_timeout(600_000)
        page.goto(url)
        if weights != "imagenet":
            page.get_by_test_id("stSelectbox").first.click()
            page.get_by_role("option", name="none (untrained, random init)").click()
        page.locator('.st-key-classify_upload input[type="file"]').set_input_files(str(SAMPLE))
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
                page.locator('.st-key-classify_upload input[type="file"]').set_input_files(str(path))
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
        browser = launch(pw.chromium)
        try:
            visitor(browser, url, args, files, errors)
        finally:
            browser.close()


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--weights", default="none")
    args.add_argument("--uploads", type=int, default=0, help="huge-PNG uploads in all (issue 18: 20)")
    args.add_argument("--sessions", type=int, default=4)
    args.add_argument("--step-timeout-s", type=int, default=600, help="give up on a session's step after this")
    args.add_argument("--server-log", type=Path, help="write the server's output here")
    args.add_argument("--booth", action="store_true", help="serve the booth (make kiosk) instead of the full app")
    args.add_argument("--max-forwards", type=int, default=None,
                      help="the server's DLGUIDE_MAX_FORWARDS (default: inherited, else the app's default 1)")
    ns = args.parse_args()
    if CHROMIUM is None:
        skip(MISSING)
    if ns.quick:  # one ordinary upload with untrained weights (the default run)
        ns.uploads, ns.weights, ns.booth = 0, "none", False
    env: dict[str, str] = {}
    if ns.booth:
        env["DLGUIDE_KIOSK"] = "1"
    if ns.max_forwards is not None:
        env["DLGUIDE_MAX_FORWARDS"] = str(ns.max_forwards)
    with tempfile.TemporaryDirectory(prefix="bench_app_memory_") as tmp:
        server = start_served(ns.server_log or Path(tmp) / "server.log", env, timeout=600)
        url = server.link()  # the full app opens with its token (issue 33); the booth ignores it
        try:
            proc = psutil.Process(server.proc.pid)
            idle = rss_mib(proc)
            if ns.uploads:
                figures = {"mode": "booth" if ns.booth else "app",
                           "max_forwards": env.get("DLGUIDE_MAX_FORWARDS", "1"), "rss_idle_mib": idle,
                           **upload_stream(url, proc, ns)}
            else:
                one_upload(url, ns.weights)
                figures = {"weights": ns.weights, "rss_idle_mib": idle, "rss_model_loaded_mib": rss_mib(proc)}
        finally:
            server.stop()
    report(result("bench_app_memory", figures), ns.json)


if __name__ == "__main__":
    main()
