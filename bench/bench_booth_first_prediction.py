"""Time to the first prediction on a fresh booth (`make kiosk`): warm launcher vs preparing on the first visit.

Each run starts serve.py in booth mode on a fresh DLGUIDE_HOME (so the ONNX export is not cached),
polls the port from the first second, then one visitor (Streamlit's websocket protocol, as
tests/support/visitors.py drives it) opens the booth and sends a camera shot. Reported per run:
the port opening, the visitor's wait (from opening the page to the answer) and the total from the
process start. `--no-warm` is the booth as it was before issue 10: the port opens at once and the
first visitor waits for the model, the export and the session.

    .venv/bin/python -m bench.bench_booth_first_prediction [--runs 1] [--backend auto]

Weights: TORCH_HOME's ImageNet file when there is one, else a stand-in Inception v3 of the same shape
(tests.support.standin_weights.standin_imagenet_state): the export and session cost the same.
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.common import alternate, parser, report, result
from tests.support.servers import start_served
from tests.support.standin_weights import weights_env
from tests.support.visitors import BoothSession, shot


def first_prediction(workdir: Path, env: dict[str, str], warm: bool, run: int) -> dict:
    home = workdir / f"home-{'warm' if warm else 'cold'}-{run}"
    server = start_served(workdir / f"{home.name}.log", {**env, "DLGUIDE_KIOSK": "1", "DLGUIDE_HOME": str(home),
                                                         "MALLOC_ARENA_MAX": "2"},
                          options=() if warm else ("--no-warm",), wait=False)
    try:
        server.wait(timeout=900)
        opened = time.monotonic()
        with BoothSession(server.url, timeout=900) as visitor:
            answer, _ = visitor.classify(shot(run))
        answered = time.monotonic()
    finally:
        server.stop()
    rows = len(answer.top)
    ready = [line for line in server.log_text().splitlines() if "booth ready" in line]
    return {"warm": warm, "port_open_s": round(opened - server.started, 1),
            "visitor_wait_s": round(answered - opened, 1), "first_prediction_s": round(answered - server.started, 1),
            "top5_rows": rows, "errors": [answer.problem()] if answer.problem() else [],
            "launcher": ready[0][9:] if ready else ""}


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--runs", type=int, default=1, help="runs of each mode (each on a fresh DLGUIDE_HOME)")
    args.add_argument("--backend", default="auto", help="DLGUIDE_KIOSK_BACKEND (auto: the fastest available; "
                                                        "--quick: PyTorch eager, which needs no export)")
    ns = args.parse_args()
    if ns.quick:  # one warm and one cold start of the eager booth
        from dlguide_core.inference.specs import BASELINE

        ns.runs, ns.backend = 1, BASELINE
    with tempfile.TemporaryDirectory() as tmp:
        env = {"DLGUIDE_OFFLINE": "1", "DLGUIDE_KIOSK_BACKEND": ns.backend, **weights_env(Path(tmp))}
        counter = {"warm": 0, "cold": 0}

        def one(mode: str) -> dict:
            row = first_prediction(Path(tmp), env, mode == "warm", counter[mode])
            counter[mode] += 1
            print(json.dumps(row), flush=True)
            return row

        rows = alternate({"warm": functools.partial(one, "warm"), "cold": functools.partial(one, "cold")}, ns.runs)
    report(result("bench_booth_first_prediction", rows), ns.json)
    failed = [r for mode in rows.values() for r in mode if r["errors"] or r["top5_rows"] != 5]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
