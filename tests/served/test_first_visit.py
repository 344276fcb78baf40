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


# Two fresh servers, one per mode: each sees every first URL at once, one tab each (bench/ soaks 20 servers).
@pytest.mark.parametrize("kiosk", [False, True], ids=["full", "kiosk"])
def test_fresh_server_first_visits_and_classify(browser, fake_imagenet, tmp_path: Path, kiosk: bool) -> None:
    # The booth's own backend in both modes (the full app serves it at /kiosk): its ranking (an export, an int8
    # model, a MIGraphX compile: a minute of CPU) is tests/pages/test_kiosk.py's and bench/'s business.
    env = {"DLGUIDE_KIOSK_BACKEND": "torch"}
    report = bench.round_trip(browser, tmp_path / "server.log", env, kiosk, bench.FIRST_PATHS)
    assert report["problems"] == [], "\n".join(report["problems"])
