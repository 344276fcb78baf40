"""Debian's chromium for the browser tests and the benches: where it is, the flags it runs with, and a launch.

Playwright's own browser download needs the internet; Debian's package does not (`make browser-deps`)."""

from __future__ import annotations

import shutil
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")  # None where it is not installed
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]
CAMERA_FLAGS = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]  # a moving test pattern
MISSING = "Debian chromium is not installed (apt-get install chromium, or make browser-deps)"


def launch(browser_type: Any, *extra_flags: str) -> Any:
    """`pw.chromium.launch(...)` of Debian's chromium with CHROMIUM_FLAGS (plus `extra_flags`); sync or async
    Playwright alike (an async caller awaits what this returns). Raises RuntimeError where chromium is missing."""
    if CHROMIUM is None:
        raise RuntimeError(MISSING)
    return browser_type.launch(executable_path=CHROMIUM, args=[*CHROMIUM_FLAGS, *extra_flags])
