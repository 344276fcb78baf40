"""Booth load test: N concurrent visitors on one served kiosk, each doing what a browser tab does, minus the drawing.

A visitor opens the page (Streamlit's websocket, /_stcore/stream: the page's one script run), then, per round,
posts a camera shot to the booth's HTTP route (web/booth_api.py: POST /_booth/classify, the answer as JSON) and
taps "Start over" (which the browser does alone: no request). Reports errors, single-visitor vs concurrent latency
(p50/p95), the server's RSS before and after the measured classifications, the server's CPU seconds per
classification (every process of the server, the measured phase only) beside the booth backend's own forward CPU
time at the batch sizes the server ran (measured after the server stops, same weights and backend), the batch sizes
the answers report (a histogram), and the load average. tests/served/test_booth_load.py runs it small; run this
for the real numbers:

    .venv/bin/python -m bench.bench_kiosk_load --sessions 10 --rounds 50
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path

from bench.common import parser, report, result
from tests.support.booth_forward import (
    WARMUP_RUNS,
    booth_backend,
    forward_cpu,
    kept_weights,
    probe_forward,
    ready_line,
    time_forward,
)
from tests.support.servers import start_served
from tests.support.visitors import run_load


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--sessions", type=int, default=10)
    args.add_argument("--rounds", type=int, default=50)
    args.add_argument("--single-rounds", type=int, default=20)
    args.add_argument("--backend", default=None,
                      help="DLGUIDE_KIOSK_BACKEND for the served booth (default: the environment's, else auto; "
                           "--quick: PyTorch eager, which needs no export)")
    args.add_argument("--home", default=None,
                      help="DLGUIDE_HOME to use and keep (its ONNX export is reused by the next run); default a "
                           "fresh temporary one")
    args.add_argument("--think-s", type=float, default=0.0,
                      help="each concurrent visitor looks at an answer for about this long before the next photo "
                           "(0.5-1.5x, drawn; default 0: a crowd that never stops, the saturation test)")
    args.add_argument("--no-forward", action="store_true",
                      help="skip timing the backend's own forward after the server stops")
    ns = args.parse_args()
    if ns.quick:  # two visitors, two photos each, on the eager backend; no forward timing
        from dlguide_core.inference.specs import BASELINE

        ns.sessions, ns.rounds, ns.single_rounds, ns.no_forward = 2, 2, 2, True
        ns.backend = ns.backend or BASELINE
    with tempfile.TemporaryDirectory() as scratch:
        home = ns.home or scratch
        Path(home).mkdir(parents=True, exist_ok=True)
        env = {"DLGUIDE_KIOSK": "1", "DLGUIDE_HOME": home, "DLGUIDE_OFFLINE": "1", **kept_weights(Path(home))}
        if ns.backend:
            env["DLGUIDE_KIOSK_BACKEND"] = ns.backend
        log_path = Path(home) / "server.log"
        prepared = None
        # the launcher prepares the booth (ONNX export) before opening the port: a long wait on a loaded CPU
        server = start_served(log_path, env, timeout=1800)
        try:
            probe = None
            booth_line = ready_line(log_path)
            if booth_line and not ns.no_forward:  # the booth's backend, here too: timed around each phase
                os.environ.update(env)  # the server's weights and DLGUIDE_HOME: its export is reused
                prepared = booth_backend(booth_line)
                if prepared[1] is not None:
                    _, backend, loaded = prepared
                    time_forward(backend, loaded, 1, 0, warmup=WARMUP_RUNS)
                    probe = functools.partial(probe_forward, backend, loaded)
            figures = run_load(server.url, server.proc.pid, sessions=ns.sessions, rounds=ns.rounds,
                               single_rounds=ns.single_rounds, think_s=ns.think_s, probe=probe)
        finally:
            server.stop()
        booth_line = ready_line(log_path)
        figures["booth"] = booth_line or "unknown (no 'booth ready' line in the log)"
        if booth_line and not ns.no_forward:
            os.environ.update(env)  # the server's weights and DLGUIDE_HOME: its export is reused, not redone
            figures["forward"] = forward_cpu(booth_line, figures["batch_histogram"] or {"1": 1}, prepared=prepared)
            fwd = figures["forward"].get("by_batch", {}).get("1", {}).get("cpu_ms_per_image")
            if fwd is not None:
                figures["server_cpu_minus_forward_ms"] = figures["server_cpu_per_classification_s"] * 1000 - fwd
                figures["single_server_cpu_minus_forward_ms"] = (
                    figures["single_server_cpu_per_classification_s"] * 1000 - fwd)
    report(result("bench_kiosk_load", {**figures, "errors": figures["errors"][:10]}), ns.json)
    return 0 if not figures["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
