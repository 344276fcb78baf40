"""Who may reach a served app (issue 22): it listens on loopback unless told otherwise, and answers only the
Host names allowed, on every route, the websocket upgrade included. Servers start as `make run` starts them.
Issue 33 (N1): loopback is shared by every user of the machine, so the full app asks for its token too."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
from pathlib import Path

import psutil
import pytest

import serve
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.servers import AppURL, start_served

pytestmark = [pytest.mark.slow]

UPGRADE = ("GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n")


@pytest.fixture(scope="module")
def default_server(tmp_path_factory):
    """`make run` as is: no address, no host list (the launcher's defaults)."""
    folder = tmp_path_factory.mktemp("hosts_default")
    env = {"DLGUIDE_HOME": str(folder / "home")}
    for name in ("DLGUIDE_ADDRESS", "DLGUIDE_ALLOWED_HOSTS", "STREAMLIT_SERVER_ADDRESS", "DLGUIDE_TOKEN"):
        env[name] = ""  # whatever the developer's shell says, the defaults are under test
    served = start_served(folder / "app.log", env, ("--no-warm",))
    served.url = AppURL(served.url, (folder / "home" / "server-token").read_text().strip())  # what make run made
    yield served
    served.stop()


def http_status(port: int, host: str, path: str = "/_stcore/health", address: str = "127.0.0.1",
                headers: dict[str, str] | None = None) -> int:
    connection = http.client.HTTPConnection(address, port, timeout=30)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", host)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def upgrade_status(port: int, host: str, address: str = "127.0.0.1", headers: dict[str, str] | None = None) -> int:
    """The status line's code for a websocket upgrade of Streamlit's /_stcore/stream with this Host."""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    with socket.create_connection((address, port), timeout=30) as sock:
        sock.sendall(UPGRADE.format(host=host, extra=extra).encode())
        head = sock.recv(4096).decode("latin-1")
    return int(head.split()[1])


def listening(pid: int) -> set[str]:
    return {c.laddr.ip for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}


def test_listens_on_loopback_only_by_default(default_server) -> None:
    assert listening(default_server.proc.pid) == {"127.0.0.1"}


@pytest.mark.parametrize("host", ["localhost:{port}", "127.0.0.1:{port}", "[::1]:{port}", "LOCALHOST", "127.0.0.1"])
def test_the_default_names_are_answered(default_server, host: str) -> None:
    host = host.format(port=default_server.port)
    signed = default_server.url.headers()  # the token's cookie
    assert http_status(default_server.port, host) == 200
    assert http_status(default_server.port, host, "/", headers=signed) == 200
    assert upgrade_status(default_server.port, host, headers=signed) == 101


@pytest.mark.parametrize("host", ["evil.example:{port}", "localhost.evil.example", "[::2]:{port}", "127.0.0.2",
                                  "evil.example:{port}@localhost"])
def test_a_foreign_host_gets_400_everywhere(default_server, host: str) -> None:
    host = host.format(port=default_server.port)
    for path in ("/_stcore/health", "/", "/train", "/static/index.html", "/_stcore/host-config"):
        assert http_status(default_server.port, host, path) == 400, path
    assert upgrade_status(default_server.port, host) == 400


def test_address_and_names_from_the_environment(tmp_path) -> None:
    """DLGUIDE_ADDRESS (another loopback address here) and DLGUIDE_ALLOWED_HOSTS replace the defaults."""
    port = free_port()
    env = {"DLGUIDE_HOME": str(tmp_path / "home"), "DLGUIDE_ADDRESS": "127.0.0.2",
           "DLGUIDE_ALLOWED_HOSTS": "dlguide.test, 127.0.0.2 ,*.team.test", "STREAMLIT_SERVER_ADDRESS": ""}
    served = start_served(tmp_path / "app.log", env, ("--no-warm",), port=port, wait=False)
    try:
        serve.wait_healthy(f"http://127.0.0.2:{port}", served.proc, log_tail=lambda: served.log_text()[-2000:])
        assert listening(served.proc.pid) == {"127.0.0.2"}
        for host, status in (("dlguide.test", 200), (f"gpu.team.test:{port}", 200), (f"localhost:{port}", 400)):
            assert http_status(port, host, address="127.0.0.2") == status, host
            signed = served.url.headers()  # DLGUIDE_TOKEN's cookie (start_served sets the variable)
            assert upgrade_status(port, host, address="127.0.0.2", headers=signed) == (101 if status == 200 else 400)
            assert upgrade_status(port, host, address="127.0.0.2") == (403 if status == 200 else 400), host
    finally:
        served.stop()


@pytest.mark.parametrize("env, option", [
    ({"DLGUIDE_ADDRESS": "0.0.0.0"}, ()),
    ({}, ("--server.address", "0.0.0.0")),
    ({}, ("--server.address=192.0.2.1",)),
])
def test_a_network_address_without_allowed_hosts_refuses_to_start(env, option) -> None:
    """One line on stderr, exit status 2, and nothing listening (the refusal comes before any socket)."""
    result = subprocess.run(serve.command(free_port(), *option), cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "DLGUIDE_ALLOWED_HOSTS": "", **env}, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "DLGUIDE_ALLOWED_HOSTS" in lines[0], result.stderr


def test_streamlits_scripts_are_sent_compressed(default_server) -> None:
    """Issue 18, the first visit on a network: the page's scripts come gzip-compressed (Streamlit 1.67 sends its
    static files raw) and unpack to the files Streamlit serves; a client without gzip gets them as before."""
    import gzip
    import re

    from streamlit import file_util

    def get(path: str, **headers: str) -> http.client.HTTPResponse:
        connection = http.client.HTTPConnection("127.0.0.1", default_server.port, timeout=30)
        connection.request("GET", path, headers={**headers, **default_server.url.headers()})
        return connection.getresponse()

    script = re.search(r'src="\./(static/js/index\.[^"]+\.js)"', get("/").read().decode()).group(1)
    on_disk = (Path(file_util.get_static_dir()) / script).read_bytes()
    packed = get(f"/{script}", **{"Accept-Encoding": "gzip, deflate"})
    assert packed.status == 200 and packed.getheader("Content-Encoding") == "gzip"
    body = packed.read()
    assert gzip.decompress(body) == on_disk and len(body) < len(on_disk) / 2
    plain = get(f"/{script}")
    assert plain.getheader("Content-Encoding") is None and plain.read() == on_disk


# ---------------------------------------------------------------- the token (issue 33, N1)


def test_a_default_server_asks_anyone_without_its_token_for_it(default_server) -> None:
    """Another user of the machine: no page, no upload, no websocket (403, the upgrade refused); health stays open.
    The page says how to get in and holds no secret."""
    port, host = default_server.port, f"127.0.0.1:{default_server.port}"
    assert upgrade_status(port, host) == 403
    assert upgrade_status(port, host, headers={"Cookie": f"dlguide_token_{port}=forged"}) == 403
    assert upgrade_status(port, host, headers={"Authorization": "token not-the-token-at-all"}) == 403
    for path in ("/", "/train", "/kiosk", "/_stcore/host-config", "/_stcore/script-health-check", "/?token=wrong"):
        assert http_status(port, host, path) == 403, path
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("PUT", "/_stcore/upload_file/some-session/some-file", body=b"x" * 1000)
    assert connection.getresponse().status == 403
    connection.close()
    connection.request("GET", "/train")
    page = connection.getresponse().read().decode()
    assert "?token=" in page and "server-token" in page and default_server.url.token not in page
    assert http_status(port, host) == 200  # /_stcore/health: "ok" for probes


def test_the_printed_address_leaves_a_cookie_and_drops_the_token(default_server) -> None:
    """`make run` prints http://127.0.0.1:PORT/?token=… (mode 0600 file, reused); the first visit gets the cookie
    and a redirect that takes the token out of the address bar; the cookie then opens the websocket."""
    token_file = default_server.log.parent / "home" / "server-token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert f"http://127.0.0.1:{default_server.port}/?token={default_server.url.token}" in default_server.log_text()
    connection = http.client.HTTPConnection("127.0.0.1", default_server.port, timeout=30)
    connection.request("GET", f"/train?x=1&token={default_server.url.token}")
    answer = connection.getresponse()
    cookie = answer.getheader("Set-Cookie")
    assert answer.status == 303 and answer.getheader("Location") == "/train?x=1"
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and default_server.url.token not in cookie
    assert upgrade_status(default_server.port, "localhost", headers={"Cookie": cookie.split(";")[0]}) == 101


@pytest.mark.parametrize("option, says", [
    (("--server.address", "127.0.0.1", "--server.address=0.0.0.0"), "--server.address is given more than once"),
    ((), "too wide"),
])
def test_an_ambiguous_address_or_a_too_wide_host_list_refuses_to_start(option, says: str) -> None:
    """Issue 33 (N13): two --server.address flags bound 0.0.0.0 past every check; `*.com` allowed every .com name."""
    env = {**os.environ, "DLGUIDE_ALLOWED_HOSTS": "*.com" if not option else ""}
    result = subprocess.run(serve.command(free_port(), *option), cwd=ROOT, capture_output=True, text=True, env=env,
                            timeout=120)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and says in lines[0], result.stderr


# ---------------------------------------------------------------- another port's page (issue 43, P1 and P6)


def test_another_ports_page_gets_no_session_even_with_the_owners_cookie(default_server) -> None:
    """P1: a page another local user serves on 127.0.0.1:8999 opened the owner's app through the owner's browser,
    whose token cookie goes to every port. The upgrade and every write from another origin answer 403."""
    port, host = default_server.port, f"127.0.0.1:{default_server.port}"
    owner = default_server.url.headers()
    assert upgrade_status(port, host, headers={**owner, "Origin": "http://127.0.0.1:8999"}) == 403
    assert upgrade_status(port, host, headers={**owner, "Origin": f"http://localhost:{port}"}) == 403
    assert upgrade_status(port, host, headers={**owner, "Origin": f"http://{host}"}) == 101  # the owner's own page
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("PUT", "/_stcore/upload_file/some-session/some-file", body=b"x" * 1000,
                       headers={**owner, "Referer": "http://127.0.0.1:8999/attack.html"})
    assert connection.getresponse().status == 403
    connection.close()


@pytest.mark.parametrize("make, token, says", [
    (lambda home: (home / "server-token").mkdir(parents=True), "", "is a directory"),
    (lambda home: home.write_text("a file where the home should be"), "", "cannot keep the server's token"),
    (lambda home: None, "a" * 16, "DLGUIDE_TOKEN must be varied"),
    (lambda home: None, "abcdefgh\x01ijklmnopq", "no spaces or control characters"),
])
def test_an_unusable_token_place_refuses_to_start_in_one_line(tmp_path: Path, make, token: str, says: str) -> None:
    """P6: a directory at server-token, or a DLGUIDE_HOME that cannot be made, gave a traceback; a DLGUIDE_TOKEN of
    16 x "a", or with control characters, was served with."""
    home = tmp_path / "home"
    make(home)
    result = subprocess.run(serve.command(free_port()), cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "DLGUIDE_HOME": str(home), "DLGUIDE_TOKEN": token})
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and says in lines[0], result.stderr
