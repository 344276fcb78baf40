"""First paint of a fresh server (issue 18, point 2): how long the first visitor looks at a blank page.

Each round starts a new server exactly as `make run` does (serve.command(): serve.py, the project's config; only
the port and the environment differ), waits until it answers its health check (the port is open: with the
warm-up, the heavy imports, the device probe and the default model are loaded by then), and opens the app in a
fresh headless Debian chromium context. It records, from the browser's navigation start:

- first content: the sidebar navigation and the page's title (h1) both on screen (target: 1 s);
- uploader: Classify's file uploader on screen (target: 2 s);

and the server's start-up (Popen to health check). The same two times are also given from the page's load
event (`loadEventEnd`: the HTML and every script it names fetched and run), the other reading of "within 1 s of
the page load". Each mode runs quiet and with a CPU load (one busy process per core, started before the server
and stopped after the visit). Modes: `warm` (serve.py as `make run` runs it), `no-warm` (serve.py --no-warm: the
first visit imports torch and loads the model itself), `bare` (the floor: a generated two-line Streamlit app with
the same five page names, a title and an uploader, run by the same Streamlit, no dlguide code at all), and with
`--before TREE`, `before`: the same visit against another checkout's serve.py (the code before issue 18.2).
`--network lan` emulates a visitor on a network (Chromium's network emulation: 20 Mbit/s down, 10 up, 20 ms
round trip) instead of loopback, where the size of what the page downloads shows:

    .venv/bin/python -m bench.bench_first_paint --rounds 3 [--modes warm,bare] [--network lan] [--json out.json]
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import serve
from bench.common import parser, report, result, skip
from tests.support.chromium import CHROMIUM, MISSING, launch
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.servers import bare_command, stop_process
from tests.support.standin_weights import weights_env
from web.token_gate import TOKEN_ENV, entry_url, new_token

NAV = "[data-testid=stSidebarNav]"
TITLE = "[data-testid=stMain] h1"
UPLOADER = ".st-key-classify_upload [data-testid=stFileUploader]"
BUSY = "while True: pass"
NETWORKS = {"loopback": None,  # Chromium's Network.emulateNetworkConditions: latency ms, bytes/s down and up
            "lan": {"offline": False, "latency": 20, "downloadThroughput": 20e6 / 8, "uploadThroughput": 10e6 / 8}}
BARE_APP = """import streamlit as st

st.set_page_config(page_title="bare", layout="wide")


def classify():
    st.title("Classify with Inception v3")
    st.file_uploader("Images", key="bare_upload")


def other():
    st.title("Another page")


names = ["Devices", "Train", "Booth", "Compiled inference"]
st.navigation([st.Page(classify, title="Classify", url_path="classify", default=True),
               *[st.Page(other, title=n, url_path=n.lower().replace(" ", "_")) for n in names]]).run()
"""


@contextmanager
def cpu_load(enabled: bool):
    """One busy Python process per core while the block runs (stopped by PID afterwards)."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(os.cpu_count() or 1)] if enabled else []
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def start(tree: Path, port: int, options: tuple[str, ...], env: dict[str, str], log: Path) -> subprocess.Popen:
    if options == ("bare",):  # the floor: Streamlit alone, same address and headless start as the app
        app = log.with_name(f"bare-{port}.py")
        app.write_text(BARE_APP)
        command = bare_command(app, port)
    elif tree == ROOT:
        command = serve.command(port, *options)
    else:
        command = [sys.executable, str(tree / "serve.py"), "--server.port", str(port), *options]
    with open(log, "wb") as out:
        return subprocess.Popen(command, cwd=tree, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def visible_at(page, selector: str, timeout_ms: float) -> float:
    """Seconds from the navigation start until `selector` is on screen."""
    page.wait_for_selector(selector, state="visible", timeout=timeout_ms)
    return page.evaluate("performance.now()") / 1000


def one_round(browser, tree: Path, options: tuple[str, ...], env: dict[str, str], workdir: Path,
              loaded: bool, network: dict | None) -> dict:
    port = free_port()
    log = workdir / f"server-{port}.log"
    with cpu_load(loaded):
        began = time.monotonic()
        token = new_token()  # the full app opens with its token, as `make run` prints it (issue 33)
        proc = start(tree, port, options, {**env, "DLGUIDE_HOME": str(workdir / f"home-{port}"), TOKEN_ENV: token},
                     log)
        try:
            url = f"http://127.0.0.1:{port}"
            serve.wait_healthy(url, proc, timeout=600, log_tail=lambda: log.read_text(errors="replace")[-2000:])
            healthy = time.monotonic() - began
            entry = url if options == ("bare",) else entry_url(url, token)  # one 303 more than a bare Streamlit
            first = visit(browser, entry, network)
            again = visit(browser, entry, network)  # the same server, everything already loaded
        finally:
            stop_process(proc, timeout=20)
    return {"startup_s": round(healthy, 2), **first, **{f"again_{k}": v for k, v in again.items()}}


def visit(browser, url: str, network: dict | None = None) -> dict:
    """One visitor in a fresh browser context (empty cache): when the navigation, the title and the uploader
    appeared, from the navigation start and from the load event."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        if network:
            cdp = context.new_cdp_session(page)
            cdp.send("Network.enable")
            cdp.send("Network.emulateNetworkConditions", network)
        page.goto(url, wait_until="commit")
        nav = visible_at(page, NAV, 300_000)
        title = visible_at(page, TITLE, 300_000)
        uploader = visible_at(page, UPLOADER, 300_000)
        page.wait_for_function("performance.getEntriesByType('navigation')[0].loadEventEnd > 0")
        loaded = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000
        fetched = page.evaluate("performance.getEntriesByType('resource').reduce((n, r) => n + r.transferSize, 0)")
    finally:
        context.close()
    first = max(nav, title)
    return {"nav_s": round(nav, 2), "first_content_s": round(first, 2), "uploader_s": round(uploader, 2),
            "load_event_s": round(loaded, 2), "first_content_after_load_s": round(first - loaded, 2),
            "uploader_after_load_s": round(uploader - loaded, 2), "fetched_kib": round(fetched / 1024)}


def summary(rows: list[dict]) -> dict:
    return {key: round(statistics.median(r[key] for r in rows), 2) for key in rows[0]}


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--rounds", type=int, default=3, help="fresh servers per mode and load (default 3)")
    args.add_argument("--before", type=Path, help="another checkout to measure the same way (mode 'before')")
    args.add_argument("--modes", default="warm,no-warm", help="comma-separated: warm, no-warm, bare")
    args.add_argument("--network", choices=sorted(NETWORKS), default="loopback",
                      help="lan: emulate a visitor on a 20 Mbit/s network with a 20 ms round trip")
    ns = args.parse_args()
    if CHROMIUM is None:
        skip(MISSING)
    loads = (False,) if ns.quick else (False, True)
    if ns.quick:  # one quiet round of the warm app
        ns.rounds, ns.modes = 1, "warm"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped bench still stops its servers and load
    from playwright.sync_api import sync_playwright

    options = {"warm": (), "no-warm": ("--no-warm",), "bare": ("bare",)}
    modes = [(name, ROOT, options[name]) for name in ns.modes.split(",") if name]
    if ns.before:
        modes.append(("before", ns.before.resolve(), ()))
    results: dict[str, dict[str, list[dict]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_first_paint_") as tmp, sync_playwright() as pw:
        workdir = Path(tmp)
        env = weights_env(workdir)
        browser = launch(pw.chromium)
        for round_no in range(ns.rounds):  # interleaved: drift in the machine's load hits every mode alike
            for loaded in loads:
                for name, tree, mode_options in modes:
                    row = one_round(browser, tree, mode_options, env, workdir, loaded, NETWORKS[ns.network])
                    results.setdefault(name, {}).setdefault("loaded" if loaded else "quiet", []).append(row)
                    print(f"round {round_no + 1} {name:<8} {'loaded' if loaded else 'quiet ':<6} {row}", flush=True)
        browser.close()
    print(f"\nmedians (s; network: {ns.network}): mode, load, start-up to health, then for the first visitor and"
          " a second one (again_): navigation, first content (navigation + title), uploader, the load event,"
          " first content and uploader after the load event, KiB fetched")
    medians = {f"{name} {load}": summary(rows) for name, by_load in results.items() for load, rows in by_load.items()}
    report(result("bench_first_paint", {"network": ns.network, "medians": medians, "rounds": results}), ns.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
