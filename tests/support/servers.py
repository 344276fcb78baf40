"""A served app for module- or session-scoped fixtures: started as `make run` starts it (serve.command), stopped
by its PID (tests/conftest.py's `app_server` is the per-test factory)."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import serve
from tests.support.paths import ROOT
from tests.support.ports import free_port

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Served:
    url: str  # http://127.0.0.1:PORT
    port: int
    proc: subprocess.Popen
    log: Path

    def log_text(self) -> str:
        return ANSI.sub("", self.log.read_text(errors="replace")) if self.log.is_file() else ""

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_served(log: Path, env: dict[str, str] | None = None, options: tuple[str, ...] = (),
                 port: int | None = None, wait: bool = True) -> Served:
    """serve.py on a free port with the test's environment plus `env`; waited for unless `wait=False`."""
    port = port or free_port()
    full_env = {**os.environ, **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen(serve.command(port, *options), cwd=ROOT, env=full_env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    served = Served(f"http://127.0.0.1:{port}", port, proc, log)
    if wait:
        try:
            serve.wait_healthy(served.url, proc, log_tail=lambda: served.log_text()[-2000:])
        except Exception:
            served.stop()
            raise
    return served
