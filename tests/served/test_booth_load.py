"""The booth under load (10 concurrent websocket sessions on loopback) and its no-files-left promise.

Small round counts here; bench/bench_kiosk_load.py runs the 500-classification version.
"""

from __future__ import annotations

import math
from pathlib import Path

import psutil
import pytest

from tests.support.benches import load_bench

pytestmark = pytest.mark.slow


bench = load_bench("bench_kiosk_load")
FRAGMENT_RUN = bench.ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY


def server_pid(url: str) -> int:
    """The server process app_server started for `url` (serve.py runs streamlit in-process)."""
    port = url.rsplit(":", 1)[1]
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = child.cmdline()
        except psutil.Error:  # gone, or a zombie an earlier test's helper has not reaped yet: not a server
            continue
        if any(arg.endswith("serve.py") for arg in cmdline) and port in cmdline:
            return child.pid
    raise LookupError(f"no streamlit child serving port {port}")


def snapshot(*roots: Path) -> set[str]:
    return {str(p) for root in roots for p in root.rglob("*")}


def test_ten_concurrent_visitors(app_server, booth_home: Path) -> None:
    # The default backend (the fastest available, ranked again at start), as a restarted `make kiosk` finds its
    # export, int8 model and compiled program (booth_home); glibc arenas capped as `make kiosk` runs it.
    url = app_server(DLGUIDE_KIOSK="1", MALLOC_ARENA_MAX="2")
    report = bench.run_load(url, server_pid(url), sessions=10, rounds=2, single_rounds=3)
    print(report)  # the numbers, for `pytest -s`
    assert report["errors"] == []
    assert report["classifications"] == 20
    assert math.isfinite(report["p95_ratio"])
    # One forward at a time, so ten visitors wait about ten turns; far more means starvation. Loose on
    # purpose (the two phases see different load on a shared CI box): the ratio itself is in bench/.
    assert report["concurrent_p95_s"] < 2 * 10 * report["single_p95_s"] + 30
    # Memory: the booth's promise (RSS at most 1.5 GB on a CPU host) and no gross per-visit retention. Twenty
    # classifications cannot tell a small leak from the allocator's warm-up (5.4 % and 6.9 % growth were seen under
    # the suite's load): bench_kiosk_load.py's 500 measure the slope (docs/BENCHMARKS.md).
    assert report["rss_after_mb"] < 1536
    assert report["rss_growth"] < 0.15


# What a visit may draw: each element is a message the server's Python handles (about 1 ms apiece under a crowd,
# issue 30), and the answer, the attract view and "how it works" are one element each (ui/booth.py).
MOST_ELEMENTS = {"classify": 17, "start over": 13}


def test_visitor_taps_rerun_only_their_screen_and_leave_no_files(app_server, tmp_path: Path) -> None:
    """Issue 30: a visitor's photo and "Start over" rerun the visitor's screen alone (a fragment), not the page, in
    few elements. And the photos leave no file behind (the booth's privacy promise)."""
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    tmp.mkdir()
    url = app_server(DLGUIDE_KIOSK="1", DLGUIDE_HOME=str(home), TMPDIR=str(tmp), DLGUIDE_KIOSK_BACKEND="torch")
    with bench.BoothSession(url) as warm:  # first load: model, caches, anything the app itself keeps
        warm.classify(bench.shot(1))
    before = snapshot(home, tmp)
    with bench.BoothSession(url) as visitor:
        # 1600x1200 noise is over 1 MB: the size at which multipart parsing spools to a temp file
        photo = bench.shot(2, size=(1600, 1200))
        assert len(photo) > 1_000_000
        result, _ = visitor.classify(photo, heatmap=True)
        answered = visitor.answered
        assert not answered.errors and answered.status == FRAGMENT_RUN, answered.status
        assert sum(body.count('class="booth-row"') for body in answered.markdown) == 5
        assert answered.elements <= MOST_ELEMENTS["classify"], answered.elements
        assert not result.errors and result.status == FRAGMENT_RUN
        assert any("Grad-CAM" in caption for caption in result.captions)
        again = visitor.start_over()
        assert again.status == FRAGMENT_RUN and again.elements <= MOST_ELEMENTS["start over"], again.elements
        assert any("Show the camera something" in body for body in again.markdown)
    assert snapshot(home, tmp) == before
