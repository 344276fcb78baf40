"""A served app for module- or session-scoped fixtures: started as `make run` starts it (serve.command), stopped
by its PID (tests/conftest.py's `app_server` is the per-test factory).

Every server gets its own token (DLGUIDE_TOKEN, issue 33) unless the test's `env` names one, and tests get in
as users do: the browser's first visit is `served.link(path)` (…/path?token=…), which leaves the token's
cookie and lands on `path`; a raw client sends `served.headers()`. The booth and signed-in servers ignore it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import serve
from tests.support.paths import ROOT
from tests.support.ports import free_port
from web.token_gate import TOKEN_ENV, cookie_name, cookie_value, entry_url, new_token

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class AppURL(str):
    """A served app's base URL (http://127.0.0.1:PORT), as a plain str, that also knows the server's token."""

    token: str

    def __new__(cls, url: str, token: str) -> AppURL:
        made = super().__new__(cls, url)
        made.token = token
        return made

    def link(self, path: str = "/") -> str:
        """The address a browser's first visit opens: `path` with ?token=…, which sets the cookie and lands on
        `path` without the token (what a user does with the address `make run` prints)."""
        return entry_url(self, self.token, path)

    def headers(self) -> dict[str, str]:
        """The token's cookie, for clients that are not a browser (a websocket, an upload)."""
        return {"Cookie": f"{cookie_name(int(self.rsplit(':', 1)[1]))}={cookie_value(self.token)}"}


@dataclass
class Served:
    url: AppURL  # http://127.0.0.1:PORT
    port: int
    proc: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)  # about when the launcher was started (monotonic)

    def link(self, path: str = "/") -> str:
        return self.url.link(path)

    def log_text(self) -> str:
        return ANSI.sub("", self.log.read_text(errors="replace")) if self.log.is_file() else ""

    def wait(self, timeout: float = 300.0) -> None:
        """Until the server answers its health check (serve.wait_healthy); its log's tail in the error."""
        serve.wait_healthy(self.url, self.proc, timeout, log_tail=lambda: self.log_text()[-2000:])

    def stop(self) -> None:
        stop_process(self.proc, timeout=20)


def stop_process(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Stop a server (or any child): TERM, then KILL after `timeout` seconds (on a loaded box the report counts,
    not a graceful exit)."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def start_served(log: Path, env: dict[str, str] | None = None, options: tuple[str, ...] = (),
                 port: int | None = None, wait: bool = True, timeout: float = 300.0) -> Served:
    """serve.py on a free port with the test's environment plus `env`; waited for (up to `timeout` s) unless
    `wait=False` (then the caller watches it from its first second, `Served.started`, and calls `wait()`)."""
    port = port or free_port()
    full_env = {**os.environ, TOKEN_ENV: new_token(), **(env or {})}
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(serve.command(port, *options), cwd=ROOT, env=full_env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    served = Served(AppURL(f"http://127.0.0.1:{port}", full_env[TOKEN_ENV]), port, proc, log, started)
    if wait:
        try:
            served.wait(timeout)
        except Exception:
            served.stop()
            raise
    return served


def bare_command(app: Path, port: int) -> list[str]:
    """`streamlit run APP` with no dlguide code: a floor for the benches, on the same address and headless start
    as serve.py."""
    return [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port),
            "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
