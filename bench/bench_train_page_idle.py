"""The Train page at rest and on Start (issue 24 point 3), in headless Debian chromium against a server started
as `make run` starts it (serve.command):

- the server's CPU share (of one core) while the Train page is open and nothing runs: goal <= 2 %;
- time from opening /train to the first chart (a finished job's curves are in the store);
- time from clicking Start to the page's answer about the new job (queued/running);
- every host the page asked for (only the app's own is allowed: offline and private).

    .venv/bin/python -m bench.bench_train_page_idle [--idle 30] [--data DIR]

Without --data a small generated ImageFolder is served; --data copies DIR (e.g. ../shared/data/tiny-imagenet-10,
prepared or not) into a fresh data root.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.common import parser, report, result, skip
from tests.support.accounting import cpu_s
from tests.support.chromium import CHROMIUM, MISSING, launch
from tests.support.jobs import cancel_active
from tests.support.servers import AppURL, start_served  # `make run`'s command line, with its token
from tests.support.toy_data import write_toy_dataset


@dataclass
class PageFigures:
    idle_cpu_share: float = float("nan")  # of one core, over the idle window
    first_chart_s: float = float("nan")  # a fresh server's first visit
    warm_chart_s: float = float("nan")  # back to Train from another page
    start_answer_s: float = float("nan")
    start_answer: str = ""
    hosts: set[str] = field(default_factory=set)


def seed_finished_job(home: Path) -> str:
    """A finished cifar_net job with 200 steps and 2 epochs in the store at `home` (the page draws it)."""
    os.environ["DLGUIDE_HOME"] = str(home)
    from dlguide_core.jobs.store import JobStore
    from dlguide_core.training.recipes import get_recipe

    store = JobStore()
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=2)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, 200, 2, ("a", "b"))
    now = time.time()
    store.add_steps([(job.id, s, s // 100, 2.0 / s, 0.001, 40.0, now + s * 0.01, None) for s in range(1, 201)])
    for epoch in (0, 1):
        store.add_epoch(job.id, epoch, {"train_loss": 1.0 - epoch / 4, "val_loss": 1.1 - epoch / 4,
                                        "top1": 50.0 + epoch, "top5": 100.0, "per_class": {"a": 40.0, "b": 60.0}})
    store.finish(job.id, "succeeded")
    store.close()
    return job.id


def measure(url: AppURL, pid: int, idle_s: float, *, start_job: bool = True, calm_ms: int = 3000) -> PageFigures:
    from playwright.sync_api import sync_playwright

    figures = PageFigures()
    with sync_playwright() as pw:
        browser = launch(pw.chromium)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.set_default_timeout(120_000)
        page.on("request", lambda request: figures.hosts.add(request.url.split("/")[2]))
        began = time.perf_counter()
        page.goto(url.link("/train"))  # the first visit carries the token (issue 33)
        page.locator(".js-plotly-plot").first.wait_for()
        figures.first_chart_s = time.perf_counter() - began
        page.get_by_role("link", name="Devices").click()
        page.get_by_text("Devices").first.wait_for()
        page.wait_for_timeout(calm_ms)
        began = time.perf_counter()
        page.get_by_role("link", name="Train").click()
        page.locator(".js-plotly-plot").first.wait_for()
        figures.warm_chart_s = time.perf_counter() - began
        page.wait_for_timeout(calm_ms)  # let the first run's stragglers (fonts, media) finish
        before, t0 = cpu_s(pid, children=False), time.perf_counter()
        page.wait_for_timeout(idle_s * 1000)
        figures.idle_cpu_share = (cpu_s(pid, children=False) - before) / (time.perf_counter() - t0)
        if start_job:
            figures.start_answer_s, figures.start_answer = start_a_job(page, calm_ms)
        browser.close()
    return figures


def start_a_job(page, calm_ms: int = 3000) -> tuple[float, str]:
    """Pick cifar_net, a short run, Start; seconds until the page says what became of the job."""
    page.get_by_test_id("stSelectbox").filter(has_text="Recipe").first.click()
    page.get_by_role("option", name=re.compile("^cifar_net")).click()
    page.locator(".st-key-train_cifar_net_epochs input").wait_for()
    page.locator(".st-key-train_cifar_net_epochs input").fill("1")
    page.locator(".st-key-train_cifar_net_max_steps input").fill("5")
    page.locator(".st-key-train_cifar_net_workers input").fill("0")
    page.wait_for_timeout(calm_ms)  # let the recipe change's rerun finish: the click must not queue behind it
    began = time.perf_counter()
    page.locator(".st-key-train_cifar_net_start button").click()
    answer = page.get_by_text(re.compile(r"\(job \d{8}-\d{6}-\w+\) (is queued|running|failed)")).first
    answer.wait_for()
    return time.perf_counter() - began, answer.inner_text()


def serve_and_measure(idle_s: float, data: Path | None, *, start_job: bool = True, calm_ms: int = 3000
                      ) -> PageFigures:
    with tempfile.TemporaryDirectory(prefix="dlguide-bench-train-") as tmp:
        roots, home = Path(tmp) / "roots", Path(tmp) / "home"
        if data is not None:
            shutil.copytree(data, roots / data.name)
        else:
            write_toy_dataset(roots / "toy", classes=2, per_class=8)
        seed_finished_job(home)
        env = {"DLGUIDE_HOME": str(home), "DLGUIDE_DATA_ROOTS": str(roots), "DLGUIDE_OFFLINE": "1",
               "DLGUIDE_MAX_JOBS": "1", "STREAMLIT_SERVER_ADDRESS": "127.0.0.1"}
        server = start_served(Path(tmp) / "server.log", env)
        try:
            return measure(server.url, server.proc.pid, idle_s, start_job=start_job, calm_ms=calm_ms)
        finally:
            server.stop()
            cancel_active(home)


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--idle", type=float, default=30.0, help="seconds the page stays open and idle")
    options.add_argument("--data", type=Path, help="a dataset folder to copy into the data root")
    args = options.parse_args()
    if CHROMIUM is None:
        skip(MISSING)
    if args.quick:  # 1 s idle, 1 s for each page to settle
        args.idle = 1.0
    figures = serve_and_measure(args.idle, args.data, calm_ms=1000 if args.quick else 3000)
    print(f"| server CPU, Train page open and idle ({args.idle:.0f} s) | {figures.idle_cpu_share:.1%} of a core |")
    print(f"| /train to the first chart, fresh server | {figures.first_chart_s:.1f} s |")
    print(f"| back to Train from Devices: first chart | {figures.warm_chart_s:.1f} s |")
    print(f"| Start to the page's answer | {figures.start_answer_s:.1f} s ({figures.start_answer!r}) |")
    print(f"| hosts asked | {', '.join(sorted(figures.hosts))} |")
    report(result("bench_train_page_idle", {**asdict(figures), "hosts": sorted(figures.hosts),
                                            "idle_s": args.idle}), args.json)


if __name__ == "__main__":
    main()
