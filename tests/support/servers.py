"""A served app for module- or session-scoped fixtures: started as `make run` starts it (serve.command), stopped
by its PID (tests/conftest.py's `app_server` is the per-test factory).

Every server gets its own token (DLGUIDE_TOKEN, issue 33) unless the test's `env` names one, and tests get in
as users do: the browser's first visit is `served.link(path)` (…/path?token=…), which leaves the token's
cookie and lands on `path`; a raw client sends `served.headers()`. The booth and signed-in servers ignore it."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
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

    def link(self, path: str = "/") -> str:
        return self.url.link(path)

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
    full_env = {**os.environ, TOKEN_ENV: new_token(), **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen(serve.command(port, *options), cwd=ROOT, env=full_env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    served = Served(AppURL(f"http://127.0.0.1:{port}", full_env[TOKEN_ENV]), port, proc, log)
    if wait:
        try:
            serve.wait_healthy(served.url, proc, log_tail=lambda: served.log_text()[-2000:])
        except Exception:
            served.stop()
            raise
    return served
