"""Fresh servers started as `make run` / `make kiosk` start them, watched from their first second (issue 10).

Every first visitor (several at once, while the server is still starting) sees only the pages of the
allow-list (none in the booth: no navigation at all), never an exception element, and the server's log
holds no traceback; then a second session classifies a photo. bench/bench_first_visit.py is the soak.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benches import load_bench

pytestmark = [pytest.mark.browser, pytest.mark.slow]


bench = load_bench("bench_first_visit")
HALF = len(bench.FIRST_PATHS) // 2


# Four fresh servers: each mode sees every first URL, split over two servers (three tabs at once on each).
@pytest.mark.parametrize("kiosk", [False, True], ids=["full", "kiosk"])
@pytest.mark.parametrize("paths", [bench.FIRST_PATHS[:HALF], bench.FIRST_PATHS[HALF:]], ids=["a", "b"])
def test_fresh_server_first_visits_and_classify(browser, fake_imagenet, tmp_path: Path, kiosk: bool,
                                                 paths: tuple[str, ...]) -> None:
    env = {"DLGUIDE_KIOSK_BACKEND": "torch"} if kiosk else {}  # the compiled booth's export is bench/'s business
    report = bench.round_trip(browser, tmp_path / "server.log", env, kiosk, paths)
    assert report["problems"] == [], "\n".join(report["problems"])
