"""Fresh servers, watched from their first second: what the first visitors see, then a classify flow.

Each round starts a new server exactly as `make run` / `make kiosk` do (serve.py, the project's
config; only the port and the environment differ), opens several first URLs at once in headless
Debian chromium while the server is still starting (polling until it answers), and records every
same-origin link and every exception element the pages ever show (a MutationObserver installed
before the app's own scripts). Then a second session classifies a photo. The server's log must hold
no traceback. tests/served/test_first_visit.py runs 4 servers; this is the soak:

    .venv/bin/python -m bench.bench_first_visit --servers 20 [--booth-rounds 50]

After the soak, the 10-visitor booth load of bench/bench_kiosk_load.py runs on one more fresh kiosk
server started the same way.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import parser, report, result, skip
from tests.support.chromium import CHROMIUM, MISSING, launch
from tests.support.paths import BUNDLED_SAMPLE
from tests.support.servers import Served, start_served
from tests.support.standin_weights import weights_env
from tests.support.visitors import UPLOAD_TAB, run_load

SAMPLE = BUNDLED_SAMPLE
FIRST_PATHS = ("/", "/train", "/devices", "/compiled", "/kiosk", "/cache")
FULL_LINKS = {"/", "/classify", "/devices", "/train", "/kiosk", "/compiled"}  # the sidebar's allow-list
KIOSK_LINKS: set[str] = set()  # the booth shows no navigation at all
TRACEBACK_MARKERS = ("Traceback", "Error:", "Uncaught app execution")  # Streamlit's rich tracebacks, colours stripped

# Installed before any script of the page runs: remembers every link path and exception element ever shown.
WATCHER = """
window.__seen = {links: [], exceptions: []};
new MutationObserver(() => {
  for (const a of document.querySelectorAll('a[href]')) {
    if (a.getAttribute('href').startsWith('#')) continue;  // a heading's anchor, "skip to content"
    const u = new URL(a.getAttribute('href'), location.href);
    if (u.origin === location.origin && !window.__seen.links.includes(u.pathname)) window.__seen.links.push(u.pathname);
  }
  for (const e of document.querySelectorAll('[data-testid=stException]')) {
    const text = e.innerText.slice(0, 200);
    if (!window.__seen.exceptions.includes(text)) window.__seen.exceptions.push(text);
  }
}).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ['href']});
"""


@dataclass
class Visit:
    path: str
    links: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    seconds: float = 0.0  # from the server's start to this page settled
    missing: str | None = None  # what the page never showed (it did not settle)


def start_server(log: Path, env: dict[str, str] | None = None) -> Served:
    """serve.py on a free loopback port, not waited for: the caller watches it from its first second."""
    return start_served(log, env, wait=False)


NOT_UP_YET = ("ERR_CONNECTION_REFUSED", "ERR_EMPTY_RESPONSE", 'interrupted by another navigation to "chrome-error://')


def open_when_up(page, server: Served, path: str, timeout: float) -> None:
    """goto `path` as soon as the server accepts connections (it may still be starting)."""
    deadline = time.monotonic() + timeout
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(f"the server exited with {server.proc.returncode}:\n{server.log_text()[-2000:]}")
        try:
            page.goto(server.link(path), wait_until="commit", timeout=10_000)
            return
        except Exception as exc:  # connection refused while the server starts (Chromium may report it as its
            # error page's navigation interrupting ours)
            if not any(sign in str(exc) for sign in NOT_UP_YET):
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"{server.url} did not answer within {timeout:.0f} s") from exc
            time.sleep(0.2)


def settle(page, deadline: float, late_ms: int = 1500) -> str | None:
    """Until the app ran its script once and is idle, then `late_ms` longer for late elements; None when it
    did, else what never came (by `deadline`, a time.monotonic())."""
    for selector in ("[data-testid=stApp][data-test-script-state=notRunning]",
                     "[data-testid=stMain] h1"):  # every page (and the booth) has a title
        try:
            page.wait_for_selector(selector, timeout=max(1.0, deadline - time.monotonic()) * 1000)
        except Exception:
            return f"no {selector} within the time allowed"
    page.wait_for_timeout(late_ms)
    return None


def first_visits(browser, server: Served, paths: tuple[str, ...], timeout: float = 180.0, late_ms: int = 1500
                 ) -> list[Visit]:
    """Open every path in its own session at once, from the server's first second; what each ever showed."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(WATCHER)
    pages = [context.new_page() for _ in paths]
    try:
        for page, path in zip(pages, paths):
            open_when_up(page, server, path, timeout)
        visits = []
        deadline = time.monotonic() + timeout  # one deadline for the tabs opened together
        for page, path in zip(pages, paths):
            missing = settle(page, deadline, late_ms)
            seen = page.evaluate("window.__seen")
            visits.append(Visit(path, seen["links"], seen["exceptions"], time.monotonic() - server.started, missing))
        return visits
    finally:
        context.close()


def visit_problems(visits: list[Visit], kiosk: bool) -> list[str]:
    allowed = KIOSK_LINKS if kiosk else FULL_LINKS
    problems = []
    for visit in visits:
        extra = sorted(set(visit.links) - allowed)
        if extra:
            problems.append(f"{visit.path}: links outside the allow-list {extra}")
        if visit.missing:
            problems.append(f"{visit.path}: {visit.missing}")
        if visit.exceptions:
            problems.append(f"{visit.path}: exception elements {visit.exceptions}")
    return problems


def log_problems(server: Served) -> list[str]:
    text = server.log_text()
    return [f"server log holds {marker!r}:\n{text[-3000:]}" for marker in TRACEBACK_MARKERS if marker in text][:1]


def classify_flow(browser, server: Served, kiosk: bool, photo: Path = SAMPLE, timeout: float = 180.0) -> float:
    """A second session uploads `photo` and sees a top-5; seconds from the page opening to the result."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(timeout * 1000)
    try:
        start = time.monotonic()
        page.goto(server.link())
        if kiosk:
            page.locator(UPLOAD_TAB).click()
            page.locator("input[type=file]").set_input_files(str(photo))
            page.get_by_text("I think it's a").wait_for()
            page.locator(".booth-row").nth(4).wait_for()
        else:
            page.locator('.st-key-classify_upload input[type="file"]').set_input_files(str(photo))
            page.locator('[data-testid="stPlotlyChart"] .ytick text').nth(4).wait_for()
        if page.locator("[data-testid=stException]").count():
            raise AssertionError("the classify flow shows an exception element")
        return time.monotonic() - start
    finally:
        context.close()


def round_trip(browser, log: Path, env: dict[str, str], kiosk: bool, paths: tuple[str, ...] = FIRST_PATHS,
               late_ms: int = 1500) -> dict:
    """One fresh server: its first visits, a classify flow, its log; a report with every problem found."""
    server = start_server(log, {**env, "DLGUIDE_KIOSK": "1" if kiosk else ""})
    problems: list[str] = []
    report: dict = {"kiosk": kiosk, "paths": list(paths)}
    try:
        visits = first_visits(browser, server, paths, late_ms=late_ms)
        report["first_visit_s"] = round(max(v.seconds for v in visits), 1)
        problems += visit_problems(visits, kiosk)
        if not problems:  # a broken first visit fails the round now, not after the flow's timeouts
            report["classify_s"] = round(classify_flow(browser, server, kiosk), 1)
    except Exception as exc:  # reported, not raised: the soak counts failures
        problems.append(f"{type(exc).__name__}: {exc}"[:3000])
    finally:
        server.stop()
    problems += log_problems(server)
    report["problems"] = problems
    return report


def soak(servers: int, env: dict[str, str], workdir: Path, late_ms: int = 1500) -> list[dict]:
    from playwright.sync_api import sync_playwright

    reports = []
    with sync_playwright() as pw:
        browser = launch(pw.chromium)
        for i in range(servers):
            kiosk = i % 2 == 1
            home = workdir / f"home{i}"  # a fresh DLGUIDE_HOME: nothing exported or cached from a previous round
            report = round_trip(browser, workdir / f"server{i}.log", {**env, "DLGUIDE_HOME": str(home)}, kiosk,
                                late_ms=late_ms)
            print(json.dumps(report), flush=True)
            reports.append(report)
        browser.close()
    return reports


def booth_load(env: dict[str, str], workdir: Path, rounds: int) -> dict:
    server = start_server(workdir / "booth.log", {**env, "DLGUIDE_KIOSK": "1", "MALLOC_ARENA_MAX": "2",
                                                  "DLGUIDE_HOME": str(workdir / "booth_home")})
    try:
        server.wait()
        report = run_load(server.url, server.proc.pid, sessions=10, rounds=rounds,
                          single_rounds=5)
    finally:
        server.stop()
    report["errors"] = report["errors"][:10] + log_problems(server)
    report["malloc_arena_max"] = "2"  # the server's, as `make kiosk` sets it (run_load reads this process's)
    return report


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--servers", type=int, default=20)
    args.add_argument("--booth-rounds", type=int, default=20, help="rounds of the 10-visitor booth load (0: skip)")
    ns = args.parse_args()
    if CHROMIUM is None:
        skip(MISSING)
    late_ms = 1500  # a settled page's time for late elements
    with tempfile.TemporaryDirectory() as tmp:
        env = {"DLGUIDE_OFFLINE": os.environ.get("DLGUIDE_OFFLINE", "1"), **weights_env(Path(tmp))}
        if ns.quick:  # one fresh full-app server, its first visits (0.5 s for late elements; /kiosk's booth on
            # PyTorch eager, which needs no export) and its classify flow; no booth load
            ns.servers, ns.booth_rounds, late_ms = 1, 0, 500
            from dlguide_core.inference.specs import BASELINE

            env["DLGUIDE_KIOSK_BACKEND"] = os.environ.get("DLGUIDE_KIOSK_BACKEND", BASELINE)
        start = time.monotonic()
        reports = soak(ns.servers, env, Path(tmp), late_ms)
        failed = [r for r in reports if r["problems"]]
        summary = {"servers": len(reports), "failed": len(failed), "soak_s": round(time.monotonic() - start),
                   "first_visit_s_max": max(r.get("first_visit_s", 0) for r in reports),
                   "classify_s_max": max(r.get("classify_s", 0) for r in reports)}
        if ns.booth_rounds:
            summary["booth_load"] = booth_load(env, Path(tmp), ns.booth_rounds)
    report(result("bench_first_visit", summary), ns.json)
    for failure in failed:
        print(json.dumps(failure)[:3000])
    booth_errors = summary.get("booth_load", {}).get("errors", [])
    return 0 if not failed and not booth_errors else 1


if __name__ == "__main__":
    sys.exit(main())
