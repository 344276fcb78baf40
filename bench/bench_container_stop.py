"""`docker stop` of the full app in the `cpu` image while a training job runs in it: ONNX Runtime's telemetry left on
(ORT_DISABLE_TELEMETRY=0, a user's own choice, which dlguide keeps) against dlguide's default (off), same run,
alternating.

Each stop: the image started as README says (a volume on /data, published on 127.0.0.1 only), healthy, a cifar_net
job started with `dlguide train --detach` and trained three steps, the container left running `--live` more seconds
(default 60: a server that has served a while), then, at the first moment within a minute that the server process
itself has a name lookup in flight (ONNX Runtime's uploader resolves for most of its first minutes, each lookup
waiting 20 s on this box's unanswering DNS; none comes with telemetry off, and the stop then comes after that
minute), `docker stop` with Docker's defaults (SIGTERM, SIGKILL 10 s later). It records the stop's wall time, the
container's exit code (137: killed), whether the image's entry had to kill the server at the end of its grace
(dlguide_core/container.py), and the job's status after `docker start` (`interrupted` at its checkpoint: nothing
lost). Measured here (docs/BENCHMARKS.md): with telemetry on, a stop during the uploader's first attempt
(`--live 0`) seldom waited; after a minute's serving, every stop waited on the lookup past the entry's 8 s grace.

    DOCKER_HOST=... .venv/bin/python -m bench.bench_container_stop --rounds 3

--quick skips (the image takes minutes to build; tests/docker/test_image.py stops the full app once with a job).
"""

from __future__ import annotations

import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import alternate, parser, report, result, skip
from dlguide_core.onnxruntime_lib import TELEMETRY_ENV
from tests.support.docker import IMAGE
from tests.support.ports import free_port

SIDES = {"telemetry_on": {TELEMETRY_ENV: "0"}, "dlguide_default": {}}


def _wait(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(what)
        time.sleep(1)


LOOKUP_WAIT_S = 60.0


def server_lookups(engine, name: str) -> int | None:
    """Sockets to a DNS server (port 53) the container's server process (serve.py) holds now: its own name lookups,
    not a job's or a `docker exec`'s (None: nsenter or ss is missing here, or not root)."""
    state = engine.inspect(name)["State"]
    top = engine.run("top", name, "-eo", "pid,args", check=False).stdout.splitlines()[1:]
    servers = [line.split(None, 1)[0] for line in top if "serve.py" in line and "dlguide_core.container" not in line]
    try:
        listed = subprocess.run(["nsenter", "-t", str(state["Pid"]), "-n", "ss", "-uanp"], capture_output=True,
                                text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0 or not servers:
        return None
    return sum(1 for line in listed.stdout.splitlines() if ":53 " in line and f"pid={servers[0]}," in line)


def one_stop(engine, env: dict[str, str], data: Path, live_s: float) -> dict:
    port = free_port()
    name, volume = f"dlguide-bench-stop-{port}", f"dlguide-bench-stop-{port}"
    flags = [item for key, value in env.items() for item in ("-e", f"{key}={value}")]
    engine.run("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8501", "-e", "DLGUIDE_ALLOWED_HOSTS=localhost",
               *flags, "-v", f"{volume}:/data", IMAGE)

    def job() -> dict:
        return json.loads(engine.run("exec", name, "dlguide", "jobs", "show", job_id, "--json").stdout)

    try:
        _wait(lambda: engine.inspect(name)["State"].get("Health", {}).get("Status") == "healthy", 300,
              "the container never became healthy")
        engine.run("cp", str(data), f"{name}:/data/datasets/toy")
        started = engine.run("exec", name, "dlguide", "train", "--recipe", "cifar_net", "--data", "/data/datasets/toy",
                             "--epochs", "5000", "--batch-size", "2", "--detach", "--json")
        job_id = json.loads(started.stdout)["job_id"]
        _wait(lambda: (job()["last_step"] or {}).get("step", 0) >= 3, 180, "the job never trained three steps")
        time.sleep(live_s)
        # Stop while the server resolves a name when it does within LOOKUP_WAIT_S (ONNX Runtime's uploader tries
        # for most of a minute, then backs off): the moment a user's stop meets it most of the time.
        deadline = time.monotonic() + LOOKUP_WAIT_S
        while (lookups := server_lookups(engine, name)) == 0 and time.monotonic() < deadline:  # None: cannot see
            time.sleep(0.5)
        began = time.perf_counter()
        engine.run("stop", name, timeout=120)
        took = time.perf_counter() - began
        code = engine.inspect(name)["State"]["ExitCode"]
        logs = engine.run("logs", name, check=False).stderr
        engine.run("start", name)
        status = job()["status"]
        engine.run("exec", name, "dlguide", "jobs", "cancel", job_id, check=False)
        return {"stop_s": round(took, 2), "exit_code": code, "status": status, "server_lookups_at_stop": lookups,
                "server_killed_by_entry": "did not end within" in logs}
    finally:
        engine.run("rm", "-f", name, check=False)
        engine.run("volume", "rm", "-f", volume, check=False)


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--rounds", type=int, default=3, help="alternating rounds (each side once per round)")
    args.add_argument("--live", type=float, default=60.0, help="seconds the container runs on after the job's steps")
    ns = args.parse_args()
    if ns.quick:
        skip("the image takes minutes to build (tests/docker/test_image.py stops the full app once); run without "
             "--quick")
    from tests.support.docker import ImageUnavailable, engine_with_cpu_image
    from tests.support.toy_data import write_toy_dataset

    try:
        with engine_with_cpu_image() as engine, tempfile.TemporaryDirectory() as scratch:
            data = write_toy_dataset(Path(scratch) / "toy", classes=3, per_class=8)
            rounds = alternate({side: functools.partial(one_stop, engine, env, data, ns.live)
                                for side, env in SIDES.items()}, ns.rounds,
                               lambda i, got: print(f"round {i + 1}: " + ", ".join(
                                   f"{side} {values[-1]}" for side, values in got.items()), flush=True))
    except ImageUnavailable as exc:
        skip(str(exc))
    figures = {
        "rounds": ns.rounds, "live_s": ns.live,
        "stops": rounds,
        "median_stop_s": {side: statistics.median(r["stop_s"] for r in runs) for side, runs in rounds.items()},
        "killed": {side: sum(r["exit_code"] == 137 for r in runs) for side, runs in rounds.items()},
        "stopped_during_a_lookup": {side: sum(bool(r["server_lookups_at_stop"]) for r in runs)
                                    for side, runs in rounds.items()},
    }
    report(result("bench_container_stop", figures), ns.json)
    return 0 if all(r["status"] == "interrupted" for r in rounds["dlguide_default"]) else 1


if __name__ == "__main__":
    sys.exit(main())
