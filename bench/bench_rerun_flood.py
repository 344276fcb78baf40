"""How long a flood of rerun messages from one websocket keeps a server from answering (issue 33, N3).

One client opens a session, lets its first run finish, then sends N `rerun_script` messages back to back. A prober
asks /_stcore/health every 0.2 s throughout (each probe waits up to 120 s). Recovery: from the flood's start until
the last probe that took over 1 s was answered (0 when none did). Servers, one after the other, on this machine:
a bare Streamlit app (`streamlit run` of a one-line page), dlguide's full app (serve.py, with its token's cookie)
and dlguide's booth (serve.py with DLGUIDE_KIOSK=1, public).

    .venv/bin/python -m bench.bench_rerun_flood [--floods 100,300] [--json out.json]
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState

import serve
from bench.common import parser, report, result
from tests.support.paths import ROOT
from tests.support.ports import free_port
from tests.support.servers import bare_command, stop_process
from tests.support.standin_weights import weights_env
from tests.support.visitors import BoothSession
from web.token_gate import TOKEN_ENV, cookie_name, cookie_value, new_token

BARE_APP = 'import streamlit as st\n\nst.title("bare")\nst.button("Press", key="press")\n'


def probe(url: str, stop: threading.Event, samples: list[tuple[float, float]]) -> None:
    while not stop.is_set():
        sent = time.monotonic()
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=120) as response:
                response.read()
        except OSError:
            pass
        samples.append((sent, time.monotonic() - sent))
        time.sleep(0.2)


def flood(url: str, count: int, cookie: str) -> dict:
    samples: list[tuple[float, float]] = []
    with BoothSession(url, timeout=300, cookie=cookie) as session:
        stop = threading.Event()
        prober = threading.Thread(target=probe, args=(url, stop, samples), daemon=True)
        prober.start()
        time.sleep(1.0)
        began = time.monotonic()
        for i in range(count):
            session.ws.send(BackMsg(rerun_script=ClientState(query_string=f"flood={i}")).SerializeToString())
        sent_s = time.monotonic() - began
        flooded = began + sent_s

        def answered_quickly() -> bool:  # the prober asks one at a time: every earlier probe has come back
            return any(sent > flooded + 1.0 and took < 1.0 for sent, took in list(samples))

        while not answered_quickly() and time.monotonic() - began < 600:
            time.sleep(0.2)
        stop.set()
        prober.join(timeout=130)
    slow = [(sent + took) - began for sent, took in samples if took > 1.0 and sent + took > began]
    return {"messages": count, "sent_in_s": round(sent_s, 2), "recovery_s": round(max(slow, default=0.0), 1),
            "worst_probe_s": round(max((took for sent, took in samples if sent + took > began), default=0.0), 2)}


def start(kind: str, port: int, workdir: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """A server of `kind` on `port`, waited for; the token's cookie for the full app ("" otherwise)."""
    log = open(workdir / f"{kind}.log", "wb")  # noqa: SIM115 - the child holds it
    full_env = {**os.environ, **env, "STREAMLIT_SERVER_ADDRESS": "127.0.0.1",
                "DLGUIDE_HOME": str(workdir / f"home-{kind}"), TOKEN_ENV: new_token()}
    if kind == "bare":
        app = workdir / "bare.py"
        app.write_text(BARE_APP)
        command = bare_command(app, port)
    else:
        command = serve.command(port)
        full_env["DLGUIDE_KIOSK"] = "1" if kind == "booth" else ""
    proc = subprocess.Popen(command, cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    serve.wait_healthy(url, proc, timeout=900)
    cookie = f"{cookie_name(port)}={cookie_value(full_env[TOKEN_ENV])}; " if kind == "app" else ""
    return proc, cookie


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--floods", default="100,300")
    args.add_argument("--kinds", default="bare,app,booth")
    ns = args.parse_args()
    if ns.quick:  # one flood of 20 messages on a bare Streamlit server
        ns.floods, ns.kinds = "20", "bare"
    rows = []
    with tempfile.TemporaryDirectory(prefix="dlguide-flood-") as tmp:
        workdir = Path(tmp)
        env = {"DLGUIDE_OFFLINE": "1", **weights_env(workdir)}
        for kind in ns.kinds.split(","):
            for count in (int(n) for n in ns.floods.split(",")):
                port = free_port()
                proc, cookie = start(kind, port, workdir, env)  # a fresh server per flood
                try:
                    row = {"server": kind, **flood(f"http://127.0.0.1:{port}", count, cookie)}
                finally:
                    stop_process(proc)
                print(json.dumps(row), flush=True)
                rows.append(row)
    report(result("bench_rerun_flood", {"rows": rows}), ns.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
