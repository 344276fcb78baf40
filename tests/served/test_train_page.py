"""Browser: the Train page as a visitor sees it (issue 24), on one server started as `make run` starts it, over a
store seeded with a failed job (no checkpoint) and two finished ones: the failure in full with Resume off, a
confirmed delete, a marker on a one-point epoch chart, a page that rests when nothing runs, and no request to any
host but the app's."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlguide_core.jobs.store import JobStore
from dlguide_core.training.recipes import get_recipe
from tests.support.servers import AppURL, start_served

pytestmark = [pytest.mark.browser, pytest.mark.slow]
REASON = ("Fashion-MNIST is not available offline: download the four files into a folder under the data roots "
          "and pick it")


def _seed(store: JobStore, status: str, error: str | None = None) -> str:
    cfg = get_recipe("cifar_net").make_config(data="/nonexistent", epochs=1)
    job = store.create("cifar_net", "pytorch", {**cfg.__dict__})
    store.claim(job.id, os.getpid())
    store.set_plan(job.id, 3, 1, ("a", "b"))
    now = time.time()
    store.add_steps([(job.id, s, 0, 2.0 / s, 0.001, 40.0, now + s * 0.01, None) for s in (1, 2, 3)])
    store.add_epoch(job.id, 0, {"train_loss": 1.0, "val_loss": 1.1, "top1": 50.0, "top5": 100.0,
                                "per_class": {"a": 40.0, "b": 60.0}})
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
           "STREAMLIT_SERVER_ADDRESS": "127.0.0.1"}
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
    page.locator(".st-key-train_action_job").click()
    page.get_by_role("option", name=re.compile(f"^{job_id}")).click()


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
    page.get_by_text(re.compile(f"Delete job {jobs['doomed']} .* for good")).wait_for()
    assert JobStore(home / "jobs.db").get(jobs["doomed"]).status == "succeeded"
    page.get_by_role("button", name="Delete for good").click()
    page.get_by_text(f"Deleted job {jobs['doomed']}.").wait_for()
    remaining = {j.id for j in JobStore(home / "jobs.db").list_jobs(refresh=False)}
    assert remaining == {jobs["failed"], jobs["kept"]}


def test_no_request_leaves_the_app(page, served) -> None:
    url = served[0]
    page.goto(url.link("/"))  # the Classify page too: the favicon and fonts come from the app on every page
    page.get_by_text("Classify").first.wait_for()
    page.wait_for_timeout(2000)
    assert page.hosts == {url.split("/")[2]}, page.hosts
