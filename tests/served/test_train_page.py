"""Browser: the Train page as a visitor sees it (issue 24), on one server started as `make run` starts it, over a
store seeded with a failed job (no checkpoint) and two finished ones: the failure in full with Resume off, a
confirmed delete, a marker on a one-point epoch chart, a page that rests when nothing runs, and no request to any
host but the app's. On the same server, a finished job's checkpoint is benchmarked on the Compiled page and stopped
mid-way (issue 31, 3)."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe
from tests.support.compiled_helpers import write_cifar_checkpoint
from tests.support.servers import AppURL, start_served
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]
REASON = ("Fashion-MNIST is not available offline: download the four files into a folder under the data roots "
          "and pick it")


def _seed(store: JobStore, status: str, error: str | None = None, name: str | None = None,
          checkpoint: bool = False) -> str:
    """A cifar_net job written straight into the store; "running" stays running in this (alive) test process."""
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=1)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__}, name=name)
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, 3, 1, ("a", "b"))
    now = time.time()
    store.add_steps([(job.id, s, 0, 2.0 / s, 0.001, 40.0, now + s * 0.01, None) for s in (1, 2, 3)])
    store.add_epoch(job.id, 0, {"train_loss": 1.0, "val_loss": 1.1, "top1": 50.0, "top5": 100.0,
                                "per_class": {"a": 40.0, "b": 60.0}})
    if checkpoint:
        path = job.job_dir / "checkpoint.pt"
        path.write_bytes(b"stand-in")
        store.set_checkpoint(job.id, path, 3, 0)
    if status != "running":
        store.finish(job.id, status, error)
    return job.id


@pytest.fixture(scope="module")
def served(tmp_path_factory, browser) -> Iterator[tuple[AppURL, dict[str, str], Path]]:
    """The seeded server (asks for `browser` first: no chromium, no server started)."""
    tmp = tmp_path_factory.mktemp("train_page")
    home = tmp / "home"
    (tmp / "roots").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLGUIDE_HOME", str(home))
        store = JobStore()
        jobs = {"failed": _seed(store, "failed", REASON), "kept": _seed(store, "succeeded"),
                "doomed": _seed(store, "succeeded")}
        store.close()
    env = {"DLGUIDE_HOME": str(home), "DLGUIDE_DATA_ROOTS": str(tmp / "roots"), "DLGUIDE_OFFLINE": "1",
           "STREAMLIT_SERVER_ADDRESS": "127.0.0.1",
           "DLGUIDE_MAX_JOBS": "1",  # a running job holds the only slot: a resumed one stays queued, no process
           "DLGUIDE_REFRESH_S": "0.5"}  # a live panel redraws 4x as often as by default: many redraws, little wall time
    server = start_served(tmp / "streamlit.log", env)
    try:
        yield server.url, jobs, home
    finally:
        server.stop()


@pytest.fixture(scope="module")
def page(served, browser) -> Iterator:
    url = served[0]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    tab.set_default_timeout(60_000)
    tab.hosts = set()
    tab.on("request", lambda request: tab.hosts.add(request.url.split("/")[2]))
    tab.sent = []
    tab.on("websocket", lambda ws: ws.on("framesent", lambda frame: tab.sent.append(time.monotonic())))
    tab.goto(url.link("/train"))
    tab.locator(".js-plotly-plot").first.wait_for(timeout=240_000)  # a cold server on a loaded machine
    yield tab
    context.close()


def _pick_job(page, job_id: str) -> None:
    """Open the Job picker and pick `job_id` ("name · status · id"); opened again if a redraw closed it."""
    page.locator(".st-key-train_action_job input").wait_for()
    option = page.get_by_role("option", name=re.compile(f"{re.escape(job_id)}$"))
    for _ in range(8):
        page.locator(".st-key-train_action_job input").click()
        try:
            option.wait_for(timeout=15_000)
            option.click(timeout=15_000)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    page.wait_for_function(f"() => (document.querySelector('.st-key-train_action_job input') || {{}}).value"
                           f"?.endsWith('{job_id}')", timeout=60_000)


def test_a_page_with_nothing_running_sends_nothing_to_the_server(page) -> None:
    page.wait_for_timeout(1000)
    before = len(page.sent)
    page.wait_for_timeout(5000)  # the old page reran its fragments every 1-2 s
    assert len(page.sent) == before, "the page asked the server to rerun while no job could change"


def test_a_one_point_epoch_chart_draws_a_marker(page) -> None:
    modes = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')]
        .filter(p => (p.layout.title.text || '').includes('Val accuracy per epoch'))
        .flatMap(p => p.data.map(t => t.mode))""")
    assert modes and all("markers" in m for m in modes), modes


def test_a_failed_job_shows_why_in_full_and_resume_is_off(page, served) -> None:
    jobs = served[1]
    _pick_job(page, jobs["failed"])
    page.get_by_text(REASON, exact=True).wait_for()
    assert page.get_by_role("button", name="Resume").is_disabled()
    page.get_by_text("Resume is off: No checkpoint was saved").wait_for()


def test_delete_asks_first_and_then_deletes_one_job(page, served) -> None:
    jobs, home = served[1], served[2]
    _pick_job(page, jobs["doomed"])
    page.get_by_role("button", name="Delete…").click()
    page.get_by_text(re.compile(f"Delete “cifar_net · .*” \\(job {jobs['doomed']},.* for good")).wait_for()
    assert JobStore(home / "jobs.db").get(jobs["doomed"]).status == "succeeded"
    page.get_by_role("button", name="Delete for good").click()
    page.get_by_text(f"(job {jobs['doomed']}).").wait_for()
    remaining = {j.id for j in JobStore(home / "jobs.db").list_jobs(refresh=False)}
    assert remaining == {jobs["failed"], jobs["kept"]}


def test_no_request_leaves_the_app(page, served) -> None:
    url = served[0]
    page.goto(url.link("/"))  # the Classify page too: the favicon and fonts come from the app on every page
    page.get_by_text("Classify").first.wait_for()
    page.wait_for_timeout(2000)
    assert page.hosts == {url.split("/")[2]}, page.hosts


def _after_reruns(page, count: int) -> None:
    """Wait until the page has asked for `count` more reruns (the panel's timer) and drawn the last one."""
    target = len(page.sent) + count
    page.wait_for_function("() => true")  # a round trip, so frames already in flight are counted
    deadline = time.monotonic() + 120
    while len(page.sent) < target and time.monotonic() < deadline:
        page.wait_for_timeout(500)
    assert len(page.sent) >= target, "the panel stopped rerunning"
    page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')", timeout=60_000)


def _picked(page) -> str:
    """What the Job picker shows ("" when nothing is picked)."""
    return page.locator(".st-key-train_action_job input").input_value()


def _one_job_named(page, job_id: str) -> None:
    """The picker and the summary name `job_id`."""
    assert _picked(page).endswith(job_id), _picked(page)
    assert job_id in page.locator(".st-key-train_job_summary").inner_text()


def test_resume_then_delete_keep_every_part_of_the_page_on_one_job(page, served) -> None:
    """Issue 31, 1: after Resume the picker, the summary and the buttons stay on the resumed job while the panel
    reruns; after a Delete nothing is selected (no other job's Delete one click away), however long one looks."""
    url, jobs, home = served
    store = JobStore(home / "jobs.db")
    paused = _seed(store, "cancelled", name="paused run", checkpoint=True)
    holder = _seed(store, "running", name="holder")  # the newest job (the picker's first), it keeps the panel live
    try:
        page.goto(url.link("/train"))
        _pick_job(page, paused)
        page.get_by_role("button", name="Resume").click()
        page.get_by_text(f"Resumed paused run ({paused}): queued.").wait_for()
        _after_reruns(page, 4)
        assert store.get(paused).status == "queued"
        _one_job_named(page, paused)
        assert _picked(page) == f"paused run · {paused}"  # issue 43: a label the job's state never changes
        # a queued job's buttons (the holder, running, would have the same: the picker and summary say which)
        assert page.get_by_role("button", name="Cancel").is_enabled()
        assert page.get_by_role("button", name="Delete…").is_disabled()

        _pick_job(page, jobs["kept"])
        page.get_by_role("button", name="Delete…").click()
        question = page.locator(".st-key-train_delete_box").inner_text()
        assert f"(job {jobs['kept']}, cifar_net, succeeded)" in question, question
        page.get_by_role("button", name="Delete for good").click()
        page.get_by_text(f"(job {jobs['kept']}).").wait_for()
        _after_reruns(page, 3)
        assert _picked(page) == ""
        assert page.get_by_role("button", name="Delete…").count() == 0
        assert page.locator(".st-key-train_job_summary").count() == 0

        _pick_job(page, paused)
        page.locator(".st-key-train_job_summary").get_by_text(f"paused run · job {paused}").wait_for()
        _one_job_named(page, paused)
    finally:
        store.finish(holder, "cancelled")
        store.close()


# Counts, in the page, every WebGL context made (HTMLCanvasElement.getContext) and every redraw of a chart whose
# data changed (polled every 50 ms: a conservative count).
WATCH_CHARTS = """
window.__webgl = 0; window.__redraws = 0;
const made = new WeakSet(), getContext = HTMLCanvasElement.prototype.getContext;
HTMLCanvasElement.prototype.getContext = function (type, ...rest) {
  const context = getContext.call(this, type, ...rest);
  if (context && /webgl/i.test(String(type)) && !made.has(context)) { made.add(context); window.__webgl++; }
  return context;
};
const last = new Map();
setInterval(() => {
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const title = (plot.layout && plot.layout.title && plot.layout.title.text) || '';
    const shape = (plot.data || []).map(t => (t.x && t.x.bdata !== undefined ? t.x.bdata : t.x || []).length)
      .join(',');  // a numpy array arrives as {dtype, bdata}
    if (last.has(title) && last.get(title) !== shape) window.__redraws++;
    last.set(title, shape);
  }
}, 50);
"""
LOSS_CHART = """() => [...document.querySelectorAll('.js-plotly-plot')]
  .some(p => ((p.layout.title || {}).text || '').includes('Training loss per step') && p.data.length > 0)"""
LOSS_CHART_DRAWN = """() => {
  const plot = [...document.querySelectorAll('.js-plotly-plot')]
    .find(p => ((p.layout.title || {}).text || '').includes('Training loss per step'));
  return !!plot && plot.data.length > 0 && plot.querySelectorAll('.scatterlayer path.js-line').length > 0
    && plot.querySelectorAll('.xaxislayer-above .xtick').length > 0;
}"""


def test_the_charts_of_a_running_job_stay_drawn_over_many_redraws(page, served) -> None:
    """Issue 31, 2: the page made a WebGL context per redraw of each chart (scattergl) and the browser dropped
    the oldest past 16, blanking the loss chart. Steps arrive while the page redraws its charts 100 times."""
    url, _, home = served
    store = JobStore(home / "jobs.db")
    live = _seed(store, "running", name="live")
    done = threading.Event()

    def steps() -> None:  # the job's process, as far as the page can tell: a step every 0.2 s
        step = 3
        while not done.wait(0.2):
            step += 1
            store.add_steps([(live, step, 0, 2.0 / step, 0.001, 40.0, time.time(), None)])

    writer = threading.Thread(target=steps, daemon=True)
    writer.start()
    try:
        page.add_init_script(WATCH_CHARTS)
        page.goto(url.link("/train"))
        page.wait_for_function(LOSS_CHART, timeout=240_000)
        page.wait_for_function("() => window.__redraws >= 100", timeout=300_000, polling=1000)
        assert page.evaluate("window.__webgl") <= 2, page.evaluate("window.__webgl")
        assert page.evaluate(LOSS_CHART_DRAWN), "the loss chart lost its lines or axes"
    finally:
        done.set()
        writer.join()
        store.finish(live, "cancelled")
        store.close()


# The benchmark table's rows, as text: the grid draws on a canvas and keeps an accessible table inside it.
BENCH_TABLE = """() => {
  const grid = [...document.querySelectorAll('[data-testid=stDataFrame] table[role=grid]')]
    .find(table => [...table.querySelectorAll('th')].some(th => th.textContent === 'Latency p50 (ms)'));
  return grid ? [...grid.querySelectorAll('tbody tr')].map(row => [...row.cells].map(cell => cell.textContent)) : [];
}"""


def _export_child(home: Path) -> psutil.Process | None:
    """The served app's ONNX export child (`python -m …export_child <home>/exports/….job`), while it runs."""
    for proc in psutil.process_iter(["cmdline"]):
        args = proc.info["cmdline"] or []
        if "dlguide_core.inference.export_child" in args and any(a.startswith(str(home / "exports")) for a in args):
            return proc
    return None


def _open_compiled(tab, url: AppURL, label: str) -> None:
    """The Compiled page with the weights `label` picked, drawn in full (no element left from an earlier run)."""
    tab.goto(url.link("/compiled"))
    tab.get_by_text("Benchmark against PyTorch eager").or_(tab.get_by_text("Meanwhile, pick")).first.wait_for(
        timeout=240_000)  # without cached ImageNet weights (the first choice) the page stops early, asking for others
    option = tab.get_by_role("option", name=label)
    for _ in range(8):  # opened again if a redraw closed the list
        tab.locator(".st-key-compiled_weights").click()
        try:
            option.click(timeout=15_000)
            break
        except PlaywrightTimeout:
            tab.keyboard.press("Escape")
    tab.get_by_text("· cifar_net · 10 classes").wait_for(timeout=120_000)
    tab.locator(".st-key-compiled_bench_run button").wait_for(timeout=120_000)
    tab.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')", timeout=120_000)


def _chips(tab, key: str) -> list[str]:
    """The values chosen in the multiselect `key`, in order."""
    tags = tab.locator(f".st-key-{key} [data-tag]")
    tags.first.wait_for()
    return tags.evaluate_all("tags => tags.map(tag => tag.getAttribute('aria-label'))")


def test_a_benchmark_shows_its_first_rows_while_it_runs_and_stop_keeps_them(served, browser, tmp_path) -> None:
    """Issue 31, 3, in a browser: the Compiled page's benchmark (the quick backends by default, more than one) runs
    off the script thread, the first backend's rows show while it goes on, and Stop ends it with those rows kept.
    The next backend's ONNX export (a child process, 13 to 35 s on the shared 2-core box) is held with SIGSTOP until
    Stop is pressed, so the run is surely mid-way then; let go, the export ends and the run stops before ONNX
    Runtime's first timed run (Stop lets an export or compile under way finish)."""
    url, _, home = served
    store = JobStore(home / "jobs.db")
    job = _seed(store, "succeeded", name="bench me")
    store.close()
    write_cifar_checkpoint(home / "jobs" / job / "model.pt")  # the small CNN: rows in seconds, its export not cached
    log = home.parent / "streamlit.log"  # the `served` fixture's: what the server writes during this test
    logged = log.stat().st_size
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    tab.set_default_timeout(60_000)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)[:200]))
    held: psutil.Process | None = None
    try:
        _open_compiled(tab, url, f"checkpoint of bench me ({job})")
        assert _chips(tab, "compiled_bench_backends")[:2] == ["PyTorch (eager)", "ONNX Runtime"]
        sizes = _chips(tab, "compiled_bench_sizes")
        tab.locator(".st-key-compiled_bench_run button").click()
        held = wait_for(lambda: _export_child(home), timeout=240, every=0.05, what="ONNX Runtime's export child")
        held.suspend()

        tab.get_by_text(re.compile(r"^Benchmark running: ONNX Runtime at batch 1…")).wait_for(timeout=120_000)
        tab.wait_for_function(f"() => ({BENCH_TABLE})().length === {len(sizes)}", timeout=120_000)
        first = tab.evaluate(BENCH_TABLE)  # PyTorch's rows, one per batch size, while the run goes on
        # the columns a reader compares come first (ui/compiled.py COLUMN_ORDER): the runtime's title, the batch size
        assert [(row[0], row[1]) for row in first] == [("PyTorch (eager)", size) for size in sizes], first
        assert tab.get_by_text(re.compile(r"^Running: ONNX Runtime at batch 1…")).count() == 1
        tab.locator(".st-key-compiled_bench_stop button").click()
        tab.get_by_text("Stopping before the next timed run (an export or compile under way ends first)…").wait_for()
        tab.screenshot(path=str(tmp_path / "compiled-stopping.png"))
        held.resume()

        tab.get_by_text(f"Stopped: {len(first)} row(s) were measured before it stopped.").wait_for(timeout=300_000)
        tab.get_by_text(re.compile(r"^Benchmark running")).wait_for(state="detached")
        assert tab.evaluate(BENCH_TABLE) == first
        assert tab.locator(".st-key-compiled_bench_stop").count() == 0
        assert tab.locator(".st-key-compiled_bench_run button").is_enabled()
        assert tab.locator("[data-testid=stException], [data-testid=stAlertContentError]").count() == 0
        assert tab.get_by_text("Traceback").count() == 0 and errors == [], errors
        with log.open("rb") as written:
            written.seek(logged)
            assert b"Traceback" not in written.read()
        tab.get_by_role("heading", name="Benchmark against PyTorch eager").evaluate("h => h.scrollIntoView()")
        tab.screenshot(path=str(tmp_path / "compiled-stopped.png"))  # docs/screenshots/compiled-stopped.png
    finally:
        if held is not None and held.is_running():
            held.resume()
        context.close()
