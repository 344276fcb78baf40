"""A real OpenID Connect provider for sign-in tests: `oidc-provider-mock` (PyPI) on a loopback port.

It accepts any client id and secret; its sign-in form has one field, `sub`, and the email claim takes the same
value. Its issuer follows the request's Host, so everything (the app's secrets, the browser) says `localhost`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port

HOST = "localhost"


def provider_command() -> list[str] | None:
    """The provider's command line, or None when oidc-provider-mock is not installed beside this Python."""
    script = Path(sys.executable).with_name("oidc-provider-mock")
    if script.is_file():
        return [str(script)]
    found = shutil.which("oidc-provider-mock")
    return [found] if found else None


@contextmanager
def oidc_provider(log: Path, timeout: float = 60.0) -> Iterator[str]:
    """Run the provider on 127.0.0.1 (a free port) and yield its base URL (http://localhost:PORT); stopped by
    its PID afterwards."""
    command = provider_command()
    if command is None:
        raise RuntimeError("oidc-provider-mock is not installed (pip install -r requirements-dev.txt)")
    port = free_port()
    url = f"http://{HOST}:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen([*command, "--host", "127.0.0.1", "--port", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_metadata(url, proc, timeout, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for_metadata(url: str, proc: subprocess.Popen, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"oidc-provider-mock exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/.well-known/openid-configuration", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"oidc-provider-mock at {url} did not answer within {timeout:.0f} s")


def write_auth_secrets(path: Path, app_port: int, provider_url: str) -> Path:
    """A secrets.toml whose [auth] section signs visitors of http://localhost:APP_PORT in with the provider."""
    path.write_text(
        "[auth]\n"
        f'redirect_uri = "http://{HOST}:{app_port}/oauth2callback"\n'
        'cookie_secret = "a test cookie secret, not used anywhere else"\n'
        'client_id = "dlguide-test"\n'
        'client_secret = "dlguide-test-secret"\n'
        f'server_metadata_url = "{provider_url}/.well-known/openid-configuration"\n'
    )
    return path


def sign_in(page, app_url: str, subject: str) -> None:
    """In `page` (Playwright): open the app, press Sign in, give the provider's form `subject`, and come back."""
    page.goto(app_url)
    page.get_by_role("button", name="Sign in").click()
    page.locator("input[name=sub]").fill(subject)
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(f"{app_url}/**")
