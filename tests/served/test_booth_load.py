"""The booth under load (10 concurrent visitors on loopback: each opens the page over Streamlit's websocket and posts
its photos to the booth's HTTP route), its no-files-left promise, and an idle screen that costs the server nothing.

Small round counts here (tests/support/visitors.py's crowd); bench/bench_kiosk_load.py runs the 500-classification
version.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import psutil
import pytest

from tests.support import visitors

pytestmark = pytest.mark.slow



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
    report = visitors.run_load(url, server_pid(url), sessions=10, rounds=2, single_rounds=3)
    print(report)  # the numbers, for `pytest -s`
    assert report["errors"] == []
    assert report["classifications"] == 20
    assert math.isfinite(report["p95_ratio"])
    # Ten visitors who never stop share the backend: each waits about the batch before its own; far more means
    # starvation. Loose on purpose (the two phases see different load on a shared CI box): the ratio is in bench/.
    assert report["concurrent_p95_s"] < 2 * 10 * report["single_p95_s"] + 30
    assert sum(report["batch_histogram"].values()) == 20 and max(map(int, report["batch_histogram"])) > 1
    # Memory: the booth's promise (RSS at most 1.5 GB on a CPU host) and no gross per-visit retention. Twenty
    # classifications cannot tell a small leak from the allocator's warm-up (5.4 %, 6.9 % and, in a CI run of
    # 2026-12-02, 15.7 % growth were seen under the suite's load): bench_kiosk_load.py's 500 measure the slope
    # (docs/BENCHMARKS.md). What this bound catches is gross: a visit that kept its photo's tensors and
    # activations (tens of MB each) would add 50 % and more over twenty.
    assert report["rss_after_mb"] < 1536
    assert report["rss_growth"] < 0.35, report["rss_quartiles_mb"]


def test_a_visit_leaves_no_file_and_an_open_screen_costs_the_server_nothing(app_server, tmp_path: Path) -> None:
    """Issue 30: a visitor's photo and heat map are answered over HTTP, and the page's one script run is all the
    server does for a tab: no timer of the page (attract view, countdown, idle check) sends a message while the tab
    stays open. And the photos leave no file behind (the booth's privacy promise), a 1 MB one included."""
    from websockets.exceptions import ConnectionClosed

    home, tmp = tmp_path / "home", tmp_path / "tmp"
    tmp.mkdir()
    url = app_server(DLGUIDE_KIOSK="1", DLGUIDE_HOME=str(home), TMPDIR=str(tmp), DLGUIDE_KIOSK_BACKEND="torch",
                     DLGUIDE_KIOSK_IDLE_S="2")
    with visitors.BoothSession(url) as warm:  # first load: model, caches, anything the app itself keeps
        warm.classify(visitors.shot(1))
    before = snapshot(home, tmp)
    with visitors.BoothSession(url) as visitor:
        assert visitor.last.status == visitors.ForwardMsg.FINISHED_SUCCESSFULLY and not visitor.last.errors
        # 1600x1200 noise is over 1 MB: the size at which multipart parsing would spool to a temp file
        photo = visitors.shot(2, size=(1600, 1200))
        assert len(photo) > 1_000_000
        answered, _ = visitor.classify(photo, heatmap=True)
        assert not answered.problem(), answered.problem()
        assert answered.heatmap.startswith(b"\xff\xd8")  # a JPEG
        # An open tab, with its photo answered: twice the idle time and more passes, and the server sends nothing
        sent = []
        deadline = time.monotonic() + 8
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = visitor.receive(left)
            except TimeoutError:
                break
            except ConnectionClosed as exc:
                raise AssertionError("the server closed an open tab's connection") from exc
            kind = message.WhichOneof("type")
            # the page run's own last word (its status, "not running") may come after its end; nothing else may
            if kind != "session_status_changed" or message.session_status_changed.script_is_running:
                sent.append(kind)
        assert sent == [], f"an idle booth tab was sent {sent}"
    assert snapshot(home, tmp) == before
