"""The booth in the `cpu` image against the same booth on bare metal: visitors' throughput, same run, alternating.

Both booths serve at once (the same stand-in ImageNet weights, the same backend, both idle while the other is
measured): the bare-metal one from this checkout (serve.py, the venv), the container one from the `cpu` image on a
real Docker engine (tests/support/docker.py: the engine at $DOCKER_HOST, else a daemon of its own; the image built
with README's command, its layer cache making a rebuild short), its port published on 127.0.0.1, the weights
mounted read-only as README says. Each round, N visitors (tests/support/visitors.py: a browser tab's requests, minus
the drawing) send photos to one booth, then to the other, the order reversed every other round. Reports each
side's classifications/s per round, their medians and the container's loss (issue 42: 10 % at most).

    .venv/bin/python -m bench.bench_container_booth --sessions 10 --rounds 5 --photos 8

The torch in the image is the CPU build of the wheel index it was built from (tests here: the local CPU wheel), the
venv's may differ: the record names both. --quick skips (a container booth alone takes minutes to build and start;
tests/docker runs it).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import alternate, parser, report, result, skip
from dlguide_core import onnxruntime_lib
from tests.support.booth_forward import kept_weights, ready_line
from tests.support.docker import IMAGE
from tests.support.ports import free_port
from tests.support.servers import start_served
from tests.support.visitors import drive


def container_booth(engine, image: str, env: dict[str, str], checkpoints: Path) -> tuple[str, str]:
    """The image's booth, published on 127.0.0.1 only, the weights mounted read-only: (its URL, its name)."""
    port = free_port()
    name = f"dlguide-bench-booth-{port}"
    flags = [item for key, value in env.items() for item in ("-e", f"{key}={value}")]
    engine.run("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8501", *flags,
               "-e", "DLGUIDE_ALLOWED_HOSTS=localhost,127.0.0.1", "-v", f"{checkpoints}:/opt/torch/hub/checkpoints:ro",
               image)
    return f"http://127.0.0.1:{port}", name


def wait_healthy(engine, name: str, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while engine.inspect(name)["State"].get("Health", {}).get("Status") != "healthy":
        if not engine.inspect(name)["State"]["Running"] or time.monotonic() > deadline:
            raise RuntimeError(f"{name} never became healthy:\n{engine.run('logs', name, check=False).stderr[-3000:]}")
        time.sleep(2)


def throughput(url: str, sessions: int, photos: int, seeds: list[int], errors: list[str]) -> Callable[[], float]:
    def one_round() -> float:
        seeds[0] += 1
        began = time.perf_counter()
        answered, failed = drive(url, sessions=sessions, rounds=photos, seed=seeds[0] * 100, timeout=600)
        errors.extend(failed)
        return len(answered) / (time.perf_counter() - began)
    return one_round


def versions(engine, name: str) -> str:
    code = ("import torch; from dlguide_core import onnxruntime_lib; o = onnxruntime_lib.load(); "
            "print(torch.__version__, 'onnxruntime', o.__version__)")
    return engine.run("exec", name, "python", "-c", code, check=False).stdout.strip()


def measure(ns, engine, image: str, home: Path) -> dict:
    weights = kept_weights(home)
    env = {"DLGUIDE_KIOSK": "1", "DLGUIDE_OFFLINE": "1"}
    if ns.backend:
        env["DLGUIDE_KIOSK_BACKEND"] = ns.backend
    bare = start_served(home / "bare.log", {**env, "DLGUIDE_HOME": str(home / "bare"), **weights}, timeout=1800)
    url, name = container_booth(engine, image, env, Path(weights["TORCH_HOME"]) / "hub" / "checkpoints")
    errors: list[str] = []
    try:
        wait_healthy(engine, name)
        urls = {"bare_metal": bare.url, "container": url}
        for target in urls.values():  # model load, first forwards, thread pools at steady state
            drive(target, sessions=ns.sessions, rounds=1, seed=900, timeout=1800)
        seeds = [0]
        rounds = alternate({side: throughput(target, ns.sessions, ns.photos, seeds, errors)
                            for side, target in urls.items()}, ns.rounds,
                           lambda i, got: print(f"round {i + 1}: " + ", ".join(
                               f"{side} {values[-1]:.2f}/s" for side, values in got.items()), flush=True))
        (home / "container.log").write_text(engine.run("logs", name, check=False).stderr)
        inside = versions(engine, name)
    finally:
        bare.stop()
        engine.run("rm", "-f", "-v", name, check=False)
    medians = {side: statistics.median(values) for side, values in rounds.items()}
    import torch

    onnxruntime = onnxruntime_lib.load()

    return {
        "sessions": ns.sessions, "photos_per_visitor_per_round": ns.photos, "rounds": ns.rounds,
        "per_round_per_s": {side: [round(v, 2) for v in values] for side, values in rounds.items()},
        "median_per_s": {side: round(v, 2) for side, v in medians.items()},
        "container_loss": round(1 - medians["container"] / medians["bare_metal"], 3),
        "booth": {"bare_metal": ready_line(home / "bare.log"), "container": ready_line(home / "container.log")},
        "versions": {"bare_metal": f"{torch.__version__} onnxruntime {onnxruntime.__version__}", "container": inside},
        "errors": errors[:10],
    }


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--sessions", type=int, default=10, help="visitors at once")
    args.add_argument("--rounds", type=int, default=5, help="alternating rounds (each side once per round)")
    args.add_argument("--photos", type=int, default=8, help="photos each visitor sends per round")
    args.add_argument("--backend", default=None, help="DLGUIDE_KIOSK_BACKEND for both booths (default: auto)")
    args.add_argument("--home", default=None, help="a folder to keep the logs and weights in (default: temporary)")
    ns = args.parse_args()
    if ns.quick:
        skip("a booth in a container takes minutes to build and start (tests/docker runs one); run without --quick")
    from tests.support.docker import ImageUnavailable, engine_with_cpu_image

    try:
        with engine_with_cpu_image() as engine, tempfile.TemporaryDirectory() as scratch:
            home = Path(ns.home or scratch)
            home.mkdir(parents=True, exist_ok=True)
            figures = measure(ns, engine, IMAGE, home)
    except ImageUnavailable as exc:
        skip(str(exc))
    report(result("bench_container_booth", figures), ns.json)
    return 0 if not figures["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
