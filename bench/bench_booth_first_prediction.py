"""Time to the first prediction on a fresh booth (`make kiosk`): warm launcher vs preparing on the first visit.

Each run starts serve.py in booth mode on a fresh DLGUIDE_HOME (so the ONNX export is not cached),
polls the port from the first second, then one visitor (Streamlit's websocket protocol, as
bench/bench_kiosk_load.py drives it) opens the booth and sends a camera shot. Reported per run:
the port opening, the visitor's wait (from opening the page to the answer) and the total from the
process start. `--no-warm` is the booth as it was before issue 10: the port opens at once and the
first visitor waits for the model, the export and the session.

    .venv/bin/python bench/bench_booth_first_prediction.py [--runs 1] [--backend auto]

Weights: TORCH_HOME's ImageNet file when there is one, else a stand-in Inception v3 of the same shape
(tests.support.standin_weights.standin_imagenet_state): the export and session cost the same.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from bench_first_visit import start_server, wait_healthy, weights_env  # noqa: E402
from bench_kiosk_load import BoothSession, shot  # noqa: E402


def first_prediction(workdir: Path, env: dict[str, str], warm: bool, run: int) -> dict:
    home = workdir / f"home-{'warm' if warm else 'cold'}-{run}"
    server = start_server(workdir / f"{home.name}.log", {**env, "DLGUIDE_KIOSK": "1", "DLGUIDE_HOME": str(home),
                                                         "MALLOC_ARENA_MAX": "2"},
                          options=() if warm else ("--no-warm",))
    try:
        wait_healthy(server, timeout=900)
        opened = time.monotonic()
        with BoothSession(server.url, timeout=900) as visitor:
            result, _ = visitor.classify(shot(run))
        answered = time.monotonic()
    finally:
        server.stop()
    rows = len(result.top)
    ready = [line for line in server.log_text().splitlines() if "booth ready" in line]
    return {"warm": warm, "port_open_s": round(opened - server.started, 1),
            "visitor_wait_s": round(answered - opened, 1), "first_prediction_s": round(answered - server.started, 1),
            "top5_rows": rows, "errors": [result.problem()] if result.problem() else [],
            "launcher": ready[0][9:] if ready else ""}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="runs of each mode (each on a fresh DLGUIDE_HOME)")
    parser.add_argument("--backend", default="auto", help="DLGUIDE_KIOSK_BACKEND (auto: the fastest available)")
    args = parser.parse_args()
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {"DLGUIDE_OFFLINE": "1", "DLGUIDE_KIOSK_BACKEND": args.backend, **weights_env(Path(tmp))}
        for run in range(args.runs):
            for warm in (True, False):
                report = first_prediction(Path(tmp), env, warm, run)
                print(json.dumps(report), flush=True)
                reports.append(report)
    failed = [r for r in reports if r["errors"] or r["top5_rows"] != 5]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
