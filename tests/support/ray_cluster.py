"""A real single-node Ray head on loopback for the tests (and bench/), stopped by its own process group.

`ray start --head` with every port given (Ray's defaults are fixed numbers: two heads on one machine
collide), `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` (else Ray 2.60 swaps 127.0.0.1 for the host's outward
address), and its own temp dir. Never `ray stop`: it ends every Ray on the machine, a neighbour's too.
`ray start` daemonises its processes into the session it was started in (start_new_session here), so
the whole head is ended by signalling that process group, and by the pids Ray recorded in its temp dir.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port

START_TIMEOUT_S = 90.0  # about 14 s here when the box is quiet
LOOPBACK = "127.0.0.1"
NO_PROXY = {"no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}


@dataclass(frozen=True)
class RayHead:
    address: str  # the job API (dashboard), e.g. http://127.0.0.1:PORT: what RAY_ADDRESS holds for jobs
    gcs_port: int
    temp_dir: Path
    pgid: int
    startup_s: float

    @property
    def log_dir(self) -> Path:
        return self.temp_dir / "session_latest" / "logs"


def ray_available() -> str | None:
    """None when `ray start` can run here; else why not (the tests skip with it)."""
    try:
        import ray.job_submission  # noqa: F401
    except ImportError:
        return "ray[default] is not installed (pip install -r requirements-dev.txt)"
    if not (Path(sys.executable).parent / "ray").is_file() and shutil.which("ray") is None:
        return "the `ray` command is not beside this Python"
    return None


def _ports() -> dict[str, int]:
    names = ("port", "dashboard-port", "ray-client-server-port", "metrics-export-port", "dashboard-agent-listen-port",
             "dashboard-agent-grpc-port", "runtime-env-agent-port", "node-manager-port", "object-manager-port")
    ports: set[int] = set()
    while len(ports) < len(names):
        ports.add(free_port())
    return dict(zip(names, sorted(ports), strict=True))


def _worker_port_range() -> tuple[int, int]:
    # A block of free ports for the workers' gRPC servers (Ray wants a range): probe a random window.
    import random

    for _ in range(50):
        low = random.randint(20000, 30000)
        if all(_port_free(p) for p in range(low, low + 40, 7)):
            return low, low + 99
    return 20000, 20099


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind((LOOPBACK, port))
            return True
        except OSError:
            return False


def head_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment `ray start` gets: loopback kept, proxies off for loopback, metrics ports moved."""
    env = {**os.environ, **NO_PROXY, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
           "AUTOSCALER_METRIC_PORT": str(free_port()), "DASHBOARD_METRIC_PORT": str(free_port())}
    return {**env, **(extra or {})}


def start_head(num_cpus: int = 2, extra_env: dict[str, str] | None = None) -> RayHead:
    """Start a head and wait until its job API answers; RuntimeError (with `ray start`'s output) if it does not."""
    ports = _ports()
    low, high = _worker_port_range()
    temp_dir = Path(tempfile.mkdtemp(prefix="dlguide-ray-"))  # short: Ray's socket paths have a length limit
    ray = str(Path(sys.executable).parent / "ray")
    argv = [ray, "start", "--head", f"--node-ip-address={LOOPBACK}", f"--num-cpus={num_cpus}", "--num-gpus=0",
            f"--dashboard-host={LOOPBACK}", "--disable-usage-stats", "--include-dashboard=true",
            f"--temp-dir={temp_dir}", f"--min-worker-port={low}", f"--max-worker-port={high}",
            "--object-store-memory=100000000", *(f"--{name}={port}" for name, port in ports.items())]
    began = time.monotonic()
    log = temp_dir / "ray-start.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=head_env(extra_env),
                                start_new_session=True, stdin=subprocess.DEVNULL)
    head = RayHead(f"http://{LOOPBACK}:{ports['dashboard-port']}", ports["port"], temp_dir, proc.pid, 0.0)
    code = proc.wait(timeout=START_TIMEOUT_S)
    if code != 0:
        said = log.read_text(errors="replace")[-2000:]  # before stop_head removes the temp dir, log included
        stop_head(head)
        raise RuntimeError(f"ray start exited {code}: {said}")
    _wait_job_api(head, began + START_TIMEOUT_S)
    return RayHead(head.address, head.gcs_port, temp_dir, proc.pid, time.monotonic() - began)


def _wait_job_api(head: RayHead, deadline: float) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while time.monotonic() < deadline:
        try:
            with opener.open(f"{head.address}/api/version", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    stop_head(head)
    raise RuntimeError(f"Ray's job API at {head.address} did not answer within {START_TIMEOUT_S:.0f} s")


def _recorded_pids(temp_dir: Path) -> set[int]:
    """Pids of every process of this head: its process group, and whatever lives in its temp dir."""
    import psutil

    pids = set()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
        except psutil.Error:
            continue
        if str(temp_dir) in cmd:
            pids.add(proc.info["pid"])
    return pids


def stop_head(head: RayHead, timeout: float = 3.0) -> None:
    """SIGTERM this head's process group and the processes naming its temp dir, then SIGKILL what is left."""
    import psutil

    targets = set(_recorded_pids(head.temp_dir))
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.info["pid"]) == head.pgid:
                targets.add(proc.info["pid"])
        except (OSError, psutil.Error):
            continue
    targets.discard(os.getpid())
    procs = []
    for pid in targets:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            continue
    for proc in procs:
        _signal(proc, signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        _signal(proc, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=5)
    shutil.rmtree(head.temp_dir, ignore_errors=True)


def _signal(proc, sig: int) -> None:
    import psutil

    try:
        proc.send_signal(sig)
    except psutil.Error:
        pass
