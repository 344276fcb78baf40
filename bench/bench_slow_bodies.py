"""What slow bodies and a rerun flood cost the public booth (issue 43, P2 and P3), on one booth server (serve.py with
DLGUIDE_KIOSK=1, eager PyTorch, stand-in weights when the ImageNet file is absent).

Slow bodies: N sockets each POST /_booth/classify with the XSRF cookie and header and a Content-Length of 100 kB,
then send one byte every 5 s (the review's attack) until the server answers or HOLD_S passes (then they hang up).
One second in, a visitor posts a photo: the figure is how long the visitor waited, and what the slow senders got.

Held reruns: a websocket session of the booth page lets its first run finish, then sends M `rerun_script` messages
of 64 KB each, every one with a fragment id of its own, and closes. The figure is the server's RSS over its level
before the flood: right after the flood, and SETTLE_S after the session closed.

    .venv/bin/python -m bench.bench_slow_bodies [--quick] [--json out.json]    (--quick: 8 senders, 200 reruns)
"""

from __future__ import annotations

import http.cookiejar
import io
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
from PIL import Image, ImageDraw
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState

import serve
from bench.common import parser, report, result
from tests.support.ports import free_port
from tests.support.standin_weights import weights_env
from tests.support.visitors import BoothSession

HOLD_S = 60.0  # a slow sender hangs up after this (the old route then let its slot go)
VISITOR_TIMEOUT_S = 180.0
SETTLE_S = 15.0
RERUN_BYTES = 64 * 1024


def photo() -> bytes:
    img = Image.new("RGB", (400, 300), (40, 120, 200))
    ImageDraw.Draw(img).ellipse([120, 60, 280, 220], fill=(230, 200, 30))
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG")
    return buffer.getvalue()


def xsrf_opener(url: str) -> tuple[urllib.request.OpenerDirector, str]:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{url}/_stcore/health", timeout=60).read()  # sets the _streamlit_xsrf cookie
    return opener, next(c.value or "" for c in jar if c.name == "_streamlit_xsrf")


def slow_sender(port: int, xsrf: str, answers: list[str], waits: list[float], stop: threading.Event) -> None:
    head = (f"POST /_booth/classify?name=slow.jpg HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: image/jpeg\r\n"
            f"Content-Length: 100000\r\nX-Xsrftoken: {xsrf}\r\nCookie: _streamlit_xsrf={xsrf}\r\n\r\n")
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + b"\xff")
        sock.settimeout(5.0)
        while not stop.is_set() and time.monotonic() - began < HOLD_S:
            try:
                reply = sock.recv(4096)
                answers.append(reply.decode("latin-1").split("\r\n", 1)[0] or "closed")
                waits.append(time.monotonic() - began)
                return
            except TimeoutError:
                try:
                    sock.sendall(b"\xd8")
                except OSError:
                    answers.append("closed")
                    return
    answers.append(f"no answer in {HOLD_S:.0f} s (hung up)")


def slow_bodies(url: str, port: int, senders: int, head_start_s: float = 1.0) -> dict:
    opener, xsrf = xsrf_opener(url)
    answers: list[str] = []
    waits: list[float] = []
    stop = threading.Event()
    threads = [threading.Thread(target=slow_sender, args=(port, xsrf, answers, waits, stop), daemon=True)
               for _ in range(senders)]
    for thread in threads:
        thread.start()
    time.sleep(head_start_s)  # the slow senders connected and holding their bodies open
    request = urllib.request.Request(f"{url}/_booth/classify?name=visitor.jpg", data=photo(), method="POST",
                                     headers={"X-Xsrftoken": xsrf, "Content-Type": "image/jpeg"})
    began = time.monotonic()
    try:
        with opener.open(request, timeout=VISITOR_TIMEOUT_S) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:
        status = f"no answer ({exc})"
    waited = time.monotonic() - began
    for thread in threads:  # each to its answer, or HOLD_S
        thread.join(timeout=HOLD_S + 30)
    stop.set()
    tally: dict[str, int] = {}
    for answer in answers:
        tally[answer] = tally.get(answer, 0) + 1
    return {"slow_senders": senders, "visitor_status": status, "visitor_wait_s": round(waited, 2),
            "slow_senders_got": tally, "slow_senders_answered_within_s": round(max(waits, default=0.0), 1)}


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def held_reruns(url: str, pid: int, count: int, settle_s: float = SETTLE_S, calm_s: float = 2.0) -> dict:
    with BoothSession(url, timeout=300.0) as session:  # the page's first run, to its end
        time.sleep(calm_s)
        before = rss_mb(pid)
        padding = "x" * RERUN_BYTES
        began = time.monotonic()
        for i in range(count):
            session.ws.send(BackMsg(rerun_script=ClientState(query_string=f"{padding}{i}",
                                                             fragment_id=f"fragment-{i}")).SerializeToString())
        sent_s = time.monotonic() - began
        time.sleep(min(3.0, settle_s))
        flooded = rss_mb(pid)
    time.sleep(settle_s)
    settled = rss_mb(pid)
    return {"reruns": count, "rerun_kb": RERUN_BYTES // 1024, "sent_in_s": round(sent_s, 2),
            "rss_before_mb": round(before), "rss_after_flood_mb": round(flooded - before),
            "rss_held_after_close_mb": round(settled - before)}


def main() -> int:
    ns = parser(__doc__).parse_args()
    # --quick: the shortest waits (the slow senders' 408 comes after the server's own grace, BODY_GRACE_S)
    senders, reruns, settle_s, calm_s = (8, 200, 0.5, 0.5) if ns.quick else (32, 2000, SETTLE_S, 2.0)
    root = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="dlguide-slow-") as tmp:
        workdir = Path(tmp)
        port = free_port()
        env = {**os.environ, "DLGUIDE_KIOSK": "1", "DLGUIDE_KIOSK_BACKEND": "torch", "DLGUIDE_OFFLINE": "1",
               "DLGUIDE_HOME": str(workdir / "home"), "STREAMLIT_SERVER_ADDRESS": "127.0.0.1",
               **weights_env(workdir)}
        url = f"http://127.0.0.1:{port}"
        with open(workdir / "server.log", "wb") as log:
            proc = subprocess.Popen(serve.command(port), cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            serve.wait_healthy(url, proc, timeout=900,
                               log_tail=lambda: (workdir / "server.log").read_text(errors="replace")[-2000:])
            figures = {"slow_bodies": slow_bodies(url, port, senders, calm_s),
                       "held_reruns": held_reruns(url, proc.pid, reruns, settle_s, calm_s)}
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a server that does not stop is killed
                proc.kill()
    report(result("bench_slow_bodies", figures), ns.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
